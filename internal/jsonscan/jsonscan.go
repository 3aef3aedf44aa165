package jsonscan

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every error about malformed JSON.
var ErrSyntax = errors.New("invalid JSON")

// ErrNoMember is MemberElements' error for an object without the member.
var ErrNoMember = errors.New("no such member")

// Kind is the type of a JSON value.
type Kind uint8

// The kinds of JSON values.
const (
	Invalid Kind = iota
	String
	Number
	Object
	Array
	True
	False
	Null
)

var kindNames = [...]string{"invalid", "string", "number", "object", "array", "true", "false", "null"}

func (k Kind) String() string { return kindNames[k] }

// SyntaxError says where the JSON went wrong.
type SyntaxError struct {
	Offset int
	What   string
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.What
}

func (e *SyntaxError) Unwrap() error { return ErrSyntax }

func syntaxErr(offset int, what string) error { return &SyntaxError{Offset: offset, What: what} }

// Valid reports whether data is one JSON value, like json.Valid.
func Valid(data []byte) bool {
	_, _, err := Value(data)
	return err == nil
}

// Value returns the one JSON value in data, without the whitespace around
// it, and its kind. Anything but whitespace after the value is an error.
func Value(data []byte) ([]byte, Kind, error) {
	start := SkipSpace(data, 0)
	kind, end, err := scanValue(data, start, 0)
	if err != nil {
		return nil, Invalid, err
	}
	if err := trailing(data, end); err != nil {
		return nil, Invalid, err
	}
	return data[start:end], kind, nil
}

// Members calls fn for each member of the object that is all of data, in
// order, with the decoded key and the raw value (see Value). The key is only
// valid during the call. A duplicate key is passed again, so the last one
// wins when fn assigns. Members validates as it goes: when it returns an
// error, fn may have seen the members before the fault, and the caller must
// drop what it gathered. An error from fn stops the walk and is returned.
func Members(data []byte, fn func(key, value []byte, kind Kind) error) error {
	return Walk(data, func(key []byte, i int) (int, error) {
		kind, end, err := ValueAt(data, i)
		if err != nil {
			return end, err
		}
		return end, fn(key, data[i:end], kind)
	})
}

// MemberElements calls fn for each element of the array that is member key
// of the object that is all of data, and validates the other members, in
// one pass: a payload that is mostly one big array is read once, not once by
// Members and again by Elements. The elements are only skimmed: their
// strings and brackets are followed to find where each ends, but what is
// inside an object or array element is left for fn to validate, as the
// decoders of such elements do anyway. In valid JSON they are the elements
// Elements gives. A member key that is not an array is an error, and so is
// an object without it: ErrNoMember.
func MemberElements(data []byte, key string, fn func(value []byte, kind Kind) error) error {
	found := false
	err := Walk(data, func(k []byte, i int) (int, error) {
		if string(k) != key {
			_, end, err := ValueAt(data, i)
			return end, err
		}
		found = true
		if i >= len(data) || data[i] != '[' {
			_, kind, _ := Value(data[i:])
			return i, syntaxErr(i, key+" must be an array, not "+kind.String())
		}
		return elements(data, SkipSpace(data, i+1), 1, skimValue, fn)
	})
	if err == nil && !found {
		err = ErrNoMember
	}
	return err
}

// Walk walks the object that is all of data, validating it, and calls value
// for each member with its decoded key, valid during the call, and the index
// i where its value starts. value reads the value, with ValueAt,
// AppendStringAt, WalkAt or ElementsAt, and returns the index after it. Members is Walk with
// ValueAt for every member; a caller that decodes a long string member
// itself reads it once, where Members then AppendText read it twice.
func Walk(data []byte, value func(key []byte, i int) (int, error)) error {
	i, err := open(data, '{', Object)
	if err != nil {
		return err
	}
	end, err := members(data, i, value)
	if err != nil {
		return err
	}
	return trailing(data, end)
}

// WalkAt walks the object value that starts at data[i] as Walk walks a whole
// one, and returns the index after it: a decoder reads the objects nested
// in a record in the same one pass as the record.
func WalkAt(data []byte, i int, value func(key []byte, i int) (int, error)) (int, error) {
	if i >= len(data) || data[i] != '{' {
		return i, syntaxErr(i, "want an object")
	}
	return members(data, SkipSpace(data, i+1), value)
}

// members walks an object's members, the first token of which is at i, and
// returns the index after its closing brace.
func members(data []byte, i int, value func(key []byte, i int) (int, error)) (int, error) {
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, syntaxErr(i, "want an object key")
		}
		keyEnd, err := scanString(data, i)
		if err != nil {
			return keyEnd, err
		}
		key, err := keyText(data[i:keyEnd])
		if err != nil {
			return keyEnd, err
		}
		i = SkipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return i, syntaxErr(i, "want ':' after an object key")
		}
		end, err := value(key, SkipSpace(data, i+1))
		if err != nil {
			return end, err
		}
		if i, err = next(data, end, '}'); err != nil || i < 0 {
			return -i, err
		}
	}
}

// ValueAt validates the value of a member, which starts at data[i] (see
// Walk), and returns its kind and the index after it.
func ValueAt(data []byte, i int) (Kind, int, error) { return scanValue(data, i, 1) }

// SkimAt returns the kind of the value that starts at data[i] and the index
// after it, following the strings and brackets of an object or array but
// neither validating what is inside nor bounding its depth: to step over,
// in linear time, a value that is not read, such as the images of a record
// too deeply nested to decode, whose sequence number comes after them.
func SkimAt(data []byte, i int) (Kind, int, error) { return skimValue(data, i, 1) }

// keyText decodes an object key. Keys are short and almost never escaped,
// so the common case is a slice of the input, not a copy.
func keyText(raw []byte) ([]byte, error) {
	content := raw[1 : len(raw)-1]
	for _, c := range content {
		if c == '\\' || c >= utf8.RuneSelf {
			return AppendText(nil, raw)
		}
	}
	return content, nil
}

// Elements calls fn for each element of the array that is all of data, and
// validates as it goes, like Members.
func Elements(data []byte, fn func(value []byte, kind Kind) error) error {
	i, err := open(data, '[', Array)
	if err != nil {
		return err
	}
	end, err := elements(data, i, 0, scanValue, fn)
	if err != nil {
		return err
	}
	return trailing(data, end)
}

// elements calls fn for each element of the array whose first token is at
// i, depth arrays deep, as scan finds it, and returns the index after the
// array.
func elements(data []byte, i, depth int, scan func(d []byte, i, depth int) (Kind, int, error), fn func(value []byte, kind Kind) error) (int, error) {
	return eachElement(data, i, func(i int) (int, error) {
		kind, end, err := scan(data, i, depth+1)
		if err != nil {
			return end, err
		}
		return end, fn(data[i:end], kind)
	})
}

// ElementsAt calls fn for each element of the array value that starts at
// data[i], with the index where the element starts; fn reads it (ValueAt,
// WalkAt, AppendStringAt, ElementsAt) and returns the index after it.
// ElementsAt returns the index after the array.
func ElementsAt(data []byte, i int, fn func(i int) (int, error)) (int, error) {
	if i >= len(data) || data[i] != '[' {
		return i, syntaxErr(i, "want an array")
	}
	return eachElement(data, SkipSpace(data, i+1), fn)
}

// eachElement calls fn at each element of the array whose first token is
// at i, and returns the index after the array.
func eachElement(data []byte, i int, fn func(i int) (int, error)) (int, error) {
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		end, err := fn(i)
		if err != nil {
			return end, err
		}
		if i = SkipSpace(data, end); i < len(data) && data[i] == ']' {
			return i + 1, nil
		}
		if i >= len(data) || data[i] != ',' {
			return i, syntaxErr(i, "want ',' or ']'")
		}
		i = SkipSpace(data, i+1)
	}
}

// open skips to the first token inside the object or array that data must be.
func open(data []byte, bracket byte, want Kind) (int, error) {
	i := SkipSpace(data, 0)
	if i < len(data) && data[i] == bracket {
		return SkipSpace(data, i+1), nil
	}
	_, kind, err := Value(data)
	if err != nil {
		return 0, err
	}
	return 0, syntaxErr(i, "want "+want.String()+", got "+kind.String())
}

// next moves past the separator after a member or element at end: it
// returns the start of the next one, or, negated, the index after the
// closing bracket.
func next(data []byte, end int, closing byte) (int, error) {
	i := SkipSpace(data, end)
	switch {
	case i >= len(data):
		return 0, syntaxErr(i, "unexpected end, want ',' or '"+string(closing)+"'")
	case data[i] == closing:
		return -(i + 1), nil
	case data[i] == ',':
		return SkipSpace(data, i+1), nil
	default:
		return 0, syntaxErr(i, "want ',' or '"+string(closing)+"'")
	}
}

// trailing checks that only whitespace follows the value ending at end.
func trailing(data []byte, end int) error {
	if rest := SkipSpace(data, end); rest != len(data) {
		return syntaxErr(rest, "data after the value")
	}
	return nil
}
