package events

import (
	"slices"
	"strings"
	"time"
)

// StreamRecord is one DynamoDB stream record, as much of it as decoding
// reads: what Lambda delivers in a Streams event, and what the stream API
// returns.
type StreamRecord struct {
	EventName      string // INSERT, MODIFY or REMOVE
	EventSourceARN string // the stream's ARN, which names the table
	TableName      string // the table, as Kinesis Data Streams for DynamoDB names it instead
	SequenceNumber string
	// ApproximateCreationDateTime is when the change was made, to the
	// second or, in newer records, the microsecond.
	ApproximateCreationDateTime time.Time
	Keys, OldImage, NewImage    Image
}

// DecodeDynamoDB decodes one DynamoDB stream record. The change's entity is
// the table name (from the record's eventSourceARN) and its ID the values of
// the key attributes in attribute-name order, joined with "#"; the images are
// kept for the rules that read them.
func DecodeDynamoDB(rec StreamRecord) (Change, error) {
	seq := rec.SequenceNumber
	fail := func(reason string) (Change, error) {
		return Change{}, &decodeError{Record: seq, Reason: reason}
	}
	if seq == "" {
		return fail("no SequenceNumber")
	}
	table, ok := rec.TableName, rec.TableName != ""
	if !ok {
		table, ok = tableName(rec.EventSourceARN)
	}
	if !ok {
		return fail("eventSourceARN " + truncate([]byte(rec.EventSourceARN)) + " names no table")
	}
	var op Op
	switch rec.EventName {
	case "INSERT":
		op = OpCreate
	case "MODIFY":
		op = OpUpdate
	case "REMOVE":
		op = OpDelete
	default:
		return fail("eventName must be INSERT, MODIFY or REMOVE, not " + truncate([]byte(rec.EventName)))
	}
	id, err := itemID(rec.Keys)
	if err != nil {
		return fail(err.Error())
	}
	return Change{
		Entity:         table,
		ID:             id,
		Op:             op,
		OccurredAt:     rec.ApproximateCreationDateTime,
		Source:         SourceDynamoDB,
		Table:          table,
		ItemKey:        rec.Keys,
		OldImage:       rec.OldImage,
		NewImage:       rec.NewImage,
		SequenceNumber: seq,
	}, nil
}

// tableName returns the table of a stream or table ARN
// (arn:aws:dynamodb:region:account:table/NAME/stream/LABEL).
func tableName(arn string) (string, bool) {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok || !strings.HasPrefix(arn, "arn:") {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name, name != ""
}

func itemID(keys Image) (string, error) {
	if len(keys) == 0 {
		return "", invalid("no key attributes")
	}
	if len(keys) == 1 {
		for name, av := range keys {
			return keyText(name, av)
		}
	}
	names := make([]string, 0, len(keys))
	for name := range keys {
		names = append(names, name)
	}
	slices.Sort(names)
	var id strings.Builder
	for i, name := range names {
		text, err := keyText(name, keys[name])
		if err != nil {
			return "", err
		}
		if i > 0 {
			id.WriteByte('#')
		}
		id.WriteString(text)
	}
	return id.String(), nil
}

// keyText renders a key attribute, which DynamoDB allows to be S, N or B only.
func keyText(name string, av AttributeValue) (string, error) {
	switch av.Type {
	case TypeString, TypeNumber, TypeBinary:
		texts, err := av.Text()
		if err != nil {
			return "", err
		}
		if texts[0] == "" {
			return "", invalid("key attribute " + name + " is empty")
		}
		return texts[0], nil
	default:
		return "", invalid("key attribute " + name + " must be S, N or B")
	}
}
