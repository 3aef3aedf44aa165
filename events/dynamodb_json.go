package events

import (
	"cmp"
	"encoding/base64"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// DecodeDynamoDBJSON decodes one raw stream record as DecodeDynamoDB does
// and also returns its sequence number, "" when the record is too broken to
// tell. The record is read in one pass, its nested objects included; of
// its images, only the attributes keep names are decoded (nil: all), the
// others only checked to be JSON, so that what no rule reads costs little
// however large or deep it is. The key attributes are always decoded.
func DecodeDynamoDBJSON(raw []byte, keep Attributes) (string, Change, error) {
	return decodeDynamoDBJSON(raw, "", keep)
}

// decodeDynamoDBJSON is DecodeDynamoDBJSON of a record that may name its
// table (tableName) rather than its stream, and carry no sequence number
// of its own: Kinesis Data Streams for DynamoDB writes such records, which
// their Kinesis record's sequence number, seq, names.
func decodeDynamoDBJSON(raw []byte, seq string, keep Attributes) (string, Change, error) {
	rec := StreamRecord{SequenceNumber: seq}
	err := jsonscan.Walk(raw, func(key []byte, i int) (int, error) {
		if string(key) == "dynamodb" && startsWith(raw, i, '{') {
			return decodeStreamRecord(raw, i, &rec, keep)
		}
		kind, end, err := jsonscan.ValueAt(raw, i)
		if err != nil {
			return end, err
		}
		switch string(key) {
		case "eventName":
			rec.EventName, err = stringField("eventName", raw[i:end], kind)
		case "eventSourceARN":
			rec.EventSourceARN, err = stringField("eventSourceARN", raw[i:end], kind)
		case "tableName":
			rec.TableName, err = stringField("tableName", raw[i:end], kind)
		case "dynamodb":
			err = invalid("dynamodb must be an object")
		}
		return end, err
	})
	if err != nil {
		seq := cmp.Or(rec.SequenceNumber, sequenceNumber(raw))
		return seq, Change{}, recordError(seq, err)
	}
	c, err := DecodeDynamoDB(rec)
	return rec.SequenceNumber, c, err
}

// startsWith says whether the value at data[i] opens with the bracket b.
func startsWith(data []byte, i int, b byte) bool { return i < len(data) && data[i] == b }

// sequenceNumber digs a broken record's sequence number out, ignoring
// everything else, so that only it fails: an empty item identifier would
// fail its whole batch.
// The values around it are skimmed, not validated: a record refused for
// its images nested too deeply is still named.
func sequenceNumber(raw []byte) (seq string) {
	skim := func(data []byte, i int) (int, error) {
		_, end, err := jsonscan.SkimAt(data, i)
		return end, err
	}
	_ = jsonscan.Walk(raw, func(key []byte, i int) (int, error) {
		if string(key) != "dynamodb" || i >= len(raw) || raw[i] != '{' {
			return skim(raw, i)
		}
		return jsonscan.WalkAt(raw, i, func(key []byte, i int) (int, error) {
			if string(key) != "SequenceNumber" {
				return skim(raw, i)
			}
			kind, end, err := jsonscan.ValueAt(raw, i)
			if err == nil && kind == jsonscan.String {
				seq, _ = jsonscan.Text(raw[i:end])
			}
			return end, err
		})
	})
	return seq
}

func stringField(name string, value []byte, kind jsonscan.Kind) (string, error) {
	if kind != jsonscan.String {
		return "", invalid(name + " must be a string, not " + kind.String())
	}
	return jsonscan.Text(value)
}

// decodeStreamRecord decodes the object at data[i], the record's
// "dynamodb" member, its images' attributes that keep names, and returns
// the index after it.
func decodeStreamRecord(data []byte, i int, sr *StreamRecord, keep Attributes) (int, error) {
	return jsonscan.WalkAt(data, i, func(key []byte, i int) (int, error) {
		var end int
		var err error
		switch string(key) {
		case "Keys":
			sr.Keys, end, err = decodeImage("Keys", data, i, 0, nil)
		case "NewImage":
			sr.NewImage, end, err = decodeImage("NewImage", data, i, 0, keep)
		case "OldImage":
			sr.OldImage, end, err = decodeImage("OldImage", data, i, 0, keep)
		default:
			var kind jsonscan.Kind
			if kind, end, err = jsonscan.ValueAt(data, i); err != nil {
				return end, err
			}
			value := data[i:end]
			switch string(key) {
			case "SequenceNumber":
				if sr.SequenceNumber == "" {
					sr.SequenceNumber, err = stringField("SequenceNumber", value, kind)
				}
			case "ApproximateCreationDateTime":
				secs, perr := strconv.ParseFloat(unsafeString(value), 64)
				if kind != jsonscan.Number || perr != nil {
					return end, invalid("ApproximateCreationDateTime must be a number of seconds")
				}
				sr.ApproximateCreationDateTime = epochTime(secs)
			}
		}
		return end, err
	})
}

// maxNesting is DynamoDB's own limit on nested maps and lists; it also
// bounds the decoder's recursion.
const maxNesting = 32

// decodeImage decodes the image (Keys, NewImage, OldImage, or an M
// attribute's map) at data[i], the attributes that keep names, and returns
// the index after it.
func decodeImage(name string, data []byte, i, depth int, keep Attributes) (Image, int, error) {
	if !startsWith(data, i, '{') {
		return nil, i, notA(data, i, name+" must be an object")
	}
	if depth > maxNesting {
		return nil, i, invalid("attributes nested deeper than DynamoDB's 32 levels")
	}
	image := Image{}
	end, err := jsonscan.WalkAt(data, i, func(key []byte, i int) (int, error) {
		sub, kept := keep[string(key)]
		if keep != nil && !kept {
			_, end, err := jsonscan.ValueAt(data, i)
			return end, err
		}
		av, end, err := decodeAttribute(data, i, depth, sub)
		if fe := (*fieldError)(nil); errors.As(err, &fe) {
			return end, &fieldError{reason: name + "." + string(key) + ": " + fe.reason}
		}
		image[string(key)] = av
		return end, err
	})
	return image, end, err
}

// notA is the error for a value at data[i] of the wrong kind: the syntax
// error, if the value is not even JSON, else reason.
func notA(data []byte, i int, reason string) error {
	if _, _, err := jsonscan.ValueAt(data, i); err != nil {
		return err
	}
	return invalid(reason)
}

// decodeAttribute decodes a DynamoDB attribute value in its JSON form,
// {"S":"text"}, {"N":"1.5"}, {"SS":[...]}, {"M":{...}} and so on, at
// data[i], as much of it as keep says, and returns the index after it.
func decodeAttribute(data []byte, i, depth int, keep Attributes) (AttributeValue, int, error) {
	var av AttributeValue
	if !startsWith(data, i, '{') {
		return av, i, notA(data, i, "an attribute value must be an object like {\"S\":\"text\"}")
	}
	members := 0
	end, err := jsonscan.WalkAt(data, i, func(key []byte, i int) (int, error) {
		if members++; members > 1 {
			return i, invalid("an attribute value must hold exactly one type")
		}
		var end int
		var err error
		av, end, err = typedAttribute(string(key), data, i, depth, keep)
		return end, err
	})
	if err == nil && members == 0 {
		err = invalid("an attribute value must hold exactly one type")
	}
	return av, end, err
}

// typedAttribute decodes the value at data[i] of an attribute of type label,
// as much of it as keep says — of a map the members it names, of a list
// nothing —, and returns the index after it.
func typedAttribute(label string, data []byte, i, depth int, keep Attributes) (AttributeValue, int, error) {
	var av AttributeValue
	switch label {
	case "M":
		m, end, err := decodeImage("M", data, i, depth+1, keep)
		return AttributeValue{Type: TypeMap, M: m}, end, err
	case "L":
		if !startsWith(data, i, '[') {
			kind, end, err := jsonscan.ValueAt(data, i)
			return av, end, cmp.Or(err, invalid("a L attribute cannot hold "+kind.String()))
		}
		if keep != nil { // no path reads into a list
			_, end, err := jsonscan.ValueAt(data, i)
			return AttributeValue{Type: TypeList}, end, err
		}
		if depth >= maxNesting {
			return av, i, invalid("attributes nested deeper than DynamoDB's 32 levels")
		}
		var list []AttributeValue
		end, err := jsonscan.ElementsAt(data, i, func(i int) (int, error) {
			e, end, err := decodeAttribute(data, i, depth+1, nil)
			list = append(list, e)
			return end, err
		})
		return AttributeValue{Type: TypeList, L: list}, end, err
	}
	kind, end, err := jsonscan.ValueAt(data, i)
	if err != nil {
		return av, end, err
	}
	av, err = scalarAttribute(label, data[i:end], kind)
	return av, end, err
}

// scalarAttribute decodes the raw value of an attribute of type label other
// than M and L.
func scalarAttribute(label string, value []byte, kind jsonscan.Kind) (AttributeValue, error) {
	var av AttributeValue
	wrong := func() (AttributeValue, error) {
		return av, invalid("a " + label + " attribute cannot hold " + kind.String())
	}
	switch label {
	case "S", "N":
		if kind != jsonscan.String {
			return wrong()
		}
		text, err := jsonscan.Text(value)
		return AttributeValue{Type: AttributeType(label), S: text}, err
	case "B":
		b, err := appendBinary([]byte{}, value, kind) // empty, not nil, as DynamoDB gives it
		return AttributeValue{Type: TypeBinary, B: b}, err
	case "BOOL":
		if kind != jsonscan.True && kind != jsonscan.False {
			return wrong()
		}
		return AttributeValue{Type: TypeBoolean, BOOL: kind == jsonscan.True}, nil
	case "NULL":
		if kind != jsonscan.True {
			return wrong()
		}
		return AttributeValue{Type: TypeNull}, nil
	case "SS", "NS":
		if kind != jsonscan.Array {
			return wrong()
		}
		// The members are decoded into one string, which each is a part
		// of: a set of many short ones costs a few allocations, not one
		// each. Decoded, a text is seldom longer than its JSON, and each
		// member takes 3 bytes of it at the least.
		buf, ends := make([]byte, 0, len(value)), make([]int32, 0, len(value)/3)
		err := jsonscan.Elements(value, func(v []byte, k jsonscan.Kind) error {
			if k != jsonscan.String {
				return invalid("a " + label + " attribute must hold strings")
			}
			var err error
			buf, err = jsonscan.AppendText(buf, v)
			ends = append(ends, int32(len(buf)))
			return err
		})
		all, set, start := string(buf), make([]string, len(ends)), int32(0)
		for i, end := range ends {
			set[i], start = all[start:end], end
		}
		return AttributeValue{Type: AttributeType(label), SS: set}, err
	case "BS":
		if kind != jsonscan.Array {
			return wrong()
		}
		// Decoded into one array, as SS members are into one string.
		buf, ends := make([]byte, 0, len(value)*3/4), make([]int32, 0, len(value)/3)
		err := jsonscan.Elements(value, func(v []byte, k jsonscan.Kind) error {
			var err error
			buf, err = appendBinary(buf, v, k)
			ends = append(ends, int32(len(buf)))
			return err
		})
		set, start := make([][]byte, len(ends)), int32(0)
		for i, end := range ends {
			set[i], start = buf[start:end:end], end
		}
		return AttributeValue{Type: TypeBinarySet, BS: set}, err
	default:
		return av, invalid("unknown attribute type " + strconv.Quote(label))
	}
}

// appendBinary appends to dst the bytes of a binary attribute's value, a
// base64 string.
func appendBinary(dst, value []byte, kind jsonscan.Kind) ([]byte, error) {
	if kind != jsonscan.String {
		return dst, invalid("a binary attribute must be a base64 string")
	}
	var buf [256]byte
	text, err := jsonscan.AppendText(buf[:0], value)
	if err != nil {
		return dst, err
	}
	if dst, err = base64.StdEncoding.AppendDecode(dst, text); err != nil {
		return dst, invalid("a binary attribute must be a base64 string")
	}
	return dst, nil
}

// epochTime reads a time in seconds since the epoch, as streams write it,
// or in milliseconds or microseconds, as some producers do: a value past
// the year 5138 in seconds is taken as the finer unit. What is absurd in
// any unit — negative, not finite — is no time at all, never an overflow.
func epochTime(v float64) time.Time {
	const maxSeconds = 1e11
	for range 2 {
		if v > maxSeconds {
			v /= 1000
		}
	}
	if !(v > 0 && v <= maxSeconds) { // NaN too
		return time.Time{}
	}
	secs := math.Floor(v)
	return time.Unix(int64(secs), int64((v-secs)*1e9))
}
