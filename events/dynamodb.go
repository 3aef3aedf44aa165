package events

import (
	"encoding/base64"
	"slices"
	"strings"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// DecodeDynamoDB decodes one DynamoDB stream record. The change's entity is
// the table name (from the record's eventSourceARN) and its ID the values of
// the key attributes in attribute-name order, joined with "#"; the images are
// kept for the rules that read them.
func DecodeDynamoDB(rec lambdaevents.DynamoDBEventRecord) (Change, error) {
	seq := rec.Change.SequenceNumber
	fail := func(reason string) (Change, error) {
		return Change{}, &DecodeError{Record: seq, Reason: reason}
	}
	if seq == "" {
		return fail("no SequenceNumber")
	}
	table, ok := TableName(rec.EventSourceArn)
	if !ok {
		return fail("eventSourceARN " + truncate([]byte(rec.EventSourceArn)) + " names no table")
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
	id, err := itemID(rec.Change.Keys)
	if err != nil {
		return fail(err.Error())
	}
	return Change{
		Entity:         table,
		ID:             id,
		Op:             op,
		OccurredAt:     rec.Change.ApproximateCreationDateTime.Time,
		Source:         SourceDynamoDB,
		Table:          table,
		ItemKey:        rec.Change.Keys,
		OldImage:       rec.Change.OldImage,
		NewImage:       rec.Change.NewImage,
		SequenceNumber: seq,
	}, nil
}

// TableName returns the table of a stream or table ARN
// (arn:aws:dynamodb:region:account:table/NAME/stream/LABEL).
func TableName(arn string) (string, bool) {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok || !strings.HasPrefix(arn, "arn:") {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name, name != ""
}

func itemID(keys map[string]lambdaevents.DynamoDBAttributeValue) (string, error) {
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
func keyText(name string, av lambdaevents.DynamoDBAttributeValue) (string, error) {
	switch av.DataType() {
	case lambdaevents.DataTypeString, lambdaevents.DataTypeNumber, lambdaevents.DataTypeBinary:
		texts, err := AttributeText(av)
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

// AttributeText renders an attribute for a cache key: S as is, N as its
// decimal text, B in standard base64, BOOL as true or false, and each member
// of a set (SS, NS, BS) as one text. NULL, M and L render to nothing and are
// an error; reach into a map with Lookup.
func AttributeText(av lambdaevents.DynamoDBAttributeValue) (texts []string, err error) {
	// The accessors panic on a value whose type and content disagree, which
	// only a hand-built value can have; an error is the promise here.
	defer func() {
		if recover() != nil {
			texts, err = nil, invalid("the attribute value is malformed")
		}
	}()
	switch av.DataType() {
	case lambdaevents.DataTypeString:
		return []string{av.String()}, nil
	case lambdaevents.DataTypeNumber:
		return []string{av.Number()}, nil
	case lambdaevents.DataTypeBinary:
		return []string{base64.StdEncoding.EncodeToString(av.Binary())}, nil
	case lambdaevents.DataTypeBoolean:
		if av.Boolean() {
			return []string{"true"}, nil
		}
		return []string{"false"}, nil
	case lambdaevents.DataTypeStringSet:
		return av.StringSet(), nil
	case lambdaevents.DataTypeNumberSet:
		return av.NumberSet(), nil
	case lambdaevents.DataTypeBinarySet:
		set := av.BinarySet()
		texts := make([]string, len(set))
		for i, b := range set {
			texts[i] = base64.StdEncoding.EncodeToString(b)
		}
		return texts, nil
	case lambdaevents.DataTypeNull:
		return nil, invalid("the attribute is NULL")
	default:
		return nil, invalid("a map or list attribute cannot be part of a key")
	}
}

// Lookup finds the attribute at path in an item image, descending into maps
// (M) one path element at a time.
func Lookup(image map[string]lambdaevents.DynamoDBAttributeValue, path []string) (lambdaevents.DynamoDBAttributeValue, bool) {
	av, ok := image[path[0]]
	for _, name := range path[1:] {
		if !ok || av.DataType() != lambdaevents.DataTypeMap {
			return av, false
		}
		av, ok = av.Map()[name]
	}
	return av, ok
}
