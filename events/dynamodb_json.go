package events

import (
	"cmp"
	"encoding/base64"
	"strconv"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// DecodeDynamoDBJSON decodes one raw stream record as DecodeDynamoDB does
// and also returns its sequence number, "" when the record is too broken to
// tell.
func DecodeDynamoDBJSON(raw []byte) (string, Change, error) {
	var rec lambdaevents.DynamoDBEventRecord
	err := jsonscan.Members(raw, func(key, value []byte, kind jsonscan.Kind) error {
		var err error
		switch string(key) {
		case "eventName":
			rec.EventName, err = stringField("eventName", value, kind)
		case "eventSourceARN":
			rec.EventSourceArn, err = stringField("eventSourceARN", value, kind)
		case "dynamodb":
			if kind != jsonscan.Object {
				return invalid("dynamodb must be an object")
			}
			err = decodeStreamRecord(value, &rec.Change)
		}
		return err
	})
	if err != nil {
		seq := cmp.Or(rec.Change.SequenceNumber, sequenceNumber(raw))
		return seq, Change{}, recordError(seq, err)
	}
	c, err := DecodeDynamoDB(rec)
	return rec.Change.SequenceNumber, c, err
}

// sequenceNumber digs a broken record's sequence number out, ignoring
// everything else, so that only it fails: an empty item identifier would
// fail its whole batch.
func sequenceNumber(raw []byte) (seq string) {
	_ = jsonscan.Members(raw, func(key, value []byte, kind jsonscan.Kind) error {
		if string(key) == "dynamodb" && kind == jsonscan.Object {
			_ = jsonscan.Members(value, func(key, value []byte, kind jsonscan.Kind) error {
				if string(key) == "SequenceNumber" && kind == jsonscan.String {
					seq, _ = jsonscan.Text(value)
				}
				return nil
			})
		}
		return nil
	})
	return seq
}

func stringField(name string, value []byte, kind jsonscan.Kind) (string, error) {
	if kind != jsonscan.String {
		return "", invalid(name + " must be a string, not " + kind.String())
	}
	return jsonscan.Text(value)
}

func decodeStreamRecord(raw []byte, sr *lambdaevents.DynamoDBStreamRecord) error {
	return jsonscan.Members(raw, func(key, value []byte, kind jsonscan.Kind) error {
		var err error
		switch string(key) {
		case "SequenceNumber":
			sr.SequenceNumber, err = stringField("SequenceNumber", value, kind)
		case "ApproximateCreationDateTime":
			if kind != jsonscan.Number {
				return invalid("ApproximateCreationDateTime must be a number of seconds")
			}
			secs, perr := strconv.ParseFloat(unsafeString(value), 64)
			if perr != nil {
				return invalid("ApproximateCreationDateTime must be a number of seconds")
			}
			sr.ApproximateCreationDateTime.Time = time.Unix(0, int64(secs*float64(time.Second)))
		case "Keys":
			sr.Keys, err = decodeImage("Keys", value, kind, 0)
		case "NewImage":
			sr.NewImage, err = decodeImage("NewImage", value, kind, 0)
		case "OldImage":
			sr.OldImage, err = decodeImage("OldImage", value, kind, 0)
		}
		return err
	})
}

// maxNesting is DynamoDB's own limit on nested maps and lists. Refusing
// deeper input also bounds decoding, which validates each level anew.
const maxNesting = 32

func decodeImage(name string, raw []byte, kind jsonscan.Kind, depth int) (map[string]lambdaevents.DynamoDBAttributeValue, error) {
	if kind != jsonscan.Object {
		return nil, invalid(name + " must be an object")
	}
	if depth > maxNesting {
		return nil, invalid("attributes nested deeper than DynamoDB's 32 levels")
	}
	image := map[string]lambdaevents.DynamoDBAttributeValue{}
	err := jsonscan.Members(raw, func(key, value []byte, kind jsonscan.Kind) error {
		av, err := decodeAttribute(value, kind, depth)
		if err != nil {
			return &fieldError{reason: name + "." + string(key) + ": " + err.Error()}
		}
		image[string(key)] = av
		return nil
	})
	return image, err
}

// decodeAttribute decodes a DynamoDB attribute value in its JSON form,
// {"S":"text"}, {"N":"1.5"}, {"SS":[...]}, {"M":{...}} and so on.
func decodeAttribute(raw []byte, kind jsonscan.Kind, depth int) (lambdaevents.DynamoDBAttributeValue, error) {
	var av lambdaevents.DynamoDBAttributeValue
	if kind != jsonscan.Object {
		return av, invalid("an attribute value must be an object like {\"S\":\"text\"}")
	}
	members := 0
	err := jsonscan.Members(raw, func(key, value []byte, kind jsonscan.Kind) error {
		if members++; members > 1 {
			return invalid("an attribute value must hold exactly one type")
		}
		var err error
		av, err = typedAttribute(string(key), value, kind, depth)
		return err
	})
	if err == nil && members == 0 {
		err = invalid("an attribute value must hold exactly one type")
	}
	return av, err
}

func typedAttribute(label string, value []byte, kind jsonscan.Kind, depth int) (lambdaevents.DynamoDBAttributeValue, error) {
	var av lambdaevents.DynamoDBAttributeValue
	wrong := func() (lambdaevents.DynamoDBAttributeValue, error) {
		return av, invalid("a " + label + " attribute cannot hold " + kind.String())
	}
	switch label {
	case "S", "N":
		if kind != jsonscan.String {
			return wrong()
		}
		text, err := jsonscan.Text(value)
		if label == "S" {
			return lambdaevents.NewStringAttribute(text), err
		}
		return lambdaevents.NewNumberAttribute(text), err
	case "B":
		b, err := binaryText(value, kind)
		return lambdaevents.NewBinaryAttribute(b), err
	case "BOOL":
		if kind != jsonscan.True && kind != jsonscan.False {
			return wrong()
		}
		return lambdaevents.NewBooleanAttribute(kind == jsonscan.True), nil
	case "NULL":
		if kind != jsonscan.True {
			return wrong()
		}
		return lambdaevents.NewNullAttribute(), nil
	case "SS", "NS":
		if kind != jsonscan.Array {
			return wrong()
		}
		var set []string
		err := jsonscan.Elements(value, func(v []byte, k jsonscan.Kind) error {
			if k != jsonscan.String {
				return invalid("a " + label + " attribute must hold strings")
			}
			text, err := jsonscan.Text(v)
			set = append(set, text)
			return err
		})
		if label == "SS" {
			return lambdaevents.NewStringSetAttribute(set), err
		}
		return lambdaevents.NewNumberSetAttribute(set), err
	case "BS":
		if kind != jsonscan.Array {
			return wrong()
		}
		var set [][]byte
		err := jsonscan.Elements(value, func(v []byte, k jsonscan.Kind) error {
			b, err := binaryText(v, k)
			set = append(set, b)
			return err
		})
		return lambdaevents.NewBinarySetAttribute(set), err
	case "M":
		m, err := decodeImage("M", value, kind, depth+1)
		return lambdaevents.NewMapAttribute(m), err
	case "L":
		if kind != jsonscan.Array {
			return wrong()
		}
		if depth >= maxNesting {
			return av, invalid("attributes nested deeper than DynamoDB's 32 levels")
		}
		var list []lambdaevents.DynamoDBAttributeValue
		err := jsonscan.Elements(value, func(v []byte, k jsonscan.Kind) error {
			e, err := decodeAttribute(v, k, depth+1)
			list = append(list, e)
			return err
		})
		return lambdaevents.NewListAttribute(list), err
	default:
		return av, invalid("unknown attribute type " + strconv.Quote(label))
	}
}

func binaryText(value []byte, kind jsonscan.Kind) ([]byte, error) {
	if kind != jsonscan.String {
		return nil, invalid("a binary attribute must be a base64 string")
	}
	var buf [256]byte
	text, err := jsonscan.AppendText(buf[:0], value)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(unsafeString(text))
	if err != nil {
		return nil, invalid("a binary attribute must be a base64 string")
	}
	return b, nil
}
