package events

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
)

// AttributeType is the type label of a DynamoDB attribute value, as its JSON
// form spells it.
type AttributeType string

// The attribute types DynamoDB has.
const (
	TypeString    AttributeType = "S"
	TypeNumber    AttributeType = "N"
	TypeBinary    AttributeType = "B"
	TypeBoolean   AttributeType = "BOOL"
	TypeNull      AttributeType = "NULL"
	TypeStringSet AttributeType = "SS"
	TypeNumberSet AttributeType = "NS"
	TypeBinarySet AttributeType = "BS"
	TypeList      AttributeType = "L"
	TypeMap       AttributeType = "M"
)

// AttributeValue is one attribute of a stream record's image. Type says
// which field holds the value; the others are zero. A plain struct: reading
// the wrong field gives a zero value, never a panic.
type AttributeValue struct {
	Type AttributeType
	S    string // S; and N, as its decimal text
	B    []byte // B
	BOOL bool   // BOOL
	SS   []string
	BS   [][]byte
	L    []AttributeValue
	M    map[string]AttributeValue
}

// Image is an item image, or its key: attribute values by name.
type Image map[string]AttributeValue

// Attributes are the attributes of item images that a stream record's
// decoder keeps (DecodeDynamoDBJSON), by name, each with its own that it
// keeps when it is a map: what rules read. Of a map, only the members
// named are kept; of a list, only its type, since no path reads into one;
// the other types whole. What is not kept is only checked to be JSON.
// Nil keeps everything.
type Attributes map[string]Attributes

// Text renders an attribute for a cache key: S as is, N as its decimal
// text, B in standard base64, BOOL as true or false, and each member of a
// set (SS, NS, BS) as one text. NULL, M and L render to nothing and are an
// error; reach into a map with Lookup.
func (av AttributeValue) Text() ([]string, error) {
	switch av.Type {
	case TypeString, TypeNumber:
		return []string{av.S}, nil
	case TypeBinary:
		return []string{base64.StdEncoding.EncodeToString(av.B)}, nil
	case TypeBoolean:
		return []string{strconv.FormatBool(av.BOOL)}, nil
	case TypeStringSet, TypeNumberSet:
		return av.SS, nil
	case TypeBinarySet:
		texts := make([]string, len(av.BS))
		for i, b := range av.BS {
			texts[i] = base64.StdEncoding.EncodeToString(b)
		}
		return texts, nil
	case TypeNull:
		return nil, invalid("the attribute is NULL")
	case typeUnavailable:
		return nil, invalid("the source did not send the value (Debezium's unchanged TOASTed column: the table's REPLICA IDENTITY FULL sends it)")
	case TypeMap, TypeList:
		return nil, invalid("a map or list attribute cannot be part of a key")
	default:
		return nil, invalid("unknown attribute type " + strconv.Quote(string(av.Type)))
	}
}

// Lookup finds the attribute at path in an image, descending into maps (M)
// one path element at a time.
func (im Image) Lookup(path []string) (AttributeValue, bool) {
	av, ok := im[path[0]]
	for _, name := range path[1:] {
		if !ok || av.Type != TypeMap {
			return av, false
		}
		av, ok = av.M[name]
	}
	return av, ok
}

// MarshalJSON writes the value in DynamoDB's JSON form, {"S":"text"},
// {"N":"1.5"}, {"M":{…}} and so on, as streams deliver it.
func (av AttributeValue) MarshalJSON() ([]byte, error) {
	var v any
	switch av.Type {
	case TypeString, TypeNumber:
		v = av.S
	case TypeBinary:
		v = av.B
	case TypeBoolean:
		v = av.BOOL
	case TypeNull, typeUnavailable:
		v = true
	case TypeStringSet, TypeNumberSet:
		v = av.SS
	case TypeBinarySet:
		v = av.BS
	case TypeList:
		v = av.L
	case TypeMap:
		v = av.M
	default:
		return nil, errors.New("events: attribute value of unknown type " + strconv.Quote(string(av.Type)))
	}
	return json.Marshal(map[AttributeType]any{av.Type: v})
}
