package events

import (
	"bytes"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

func textIs(raw []byte, want string) bool {
	t, err := jsonscan.Text(raw)
	return err == nil && t == want
}

func nonEmptyText(field string, value []byte, kind jsonscan.Kind) (string, error) {
	if kind != jsonscan.String {
		return "", invalid(field + " must be a string, not " + kind.String())
	}
	s, err := jsonscan.Text(value)
	switch {
	case err != nil:
	case s == "":
		err = invalid(field + " is empty")
	case strings.ContainsRune(s, utf8.RuneError):
		// JSON decoding turns invalid UTF-8 and unpaired surrogates into
		// U+FFFD; a key built from that is not the producer's key.
		err = invalid(field + " holds invalid UTF-8 or an unpaired surrogate")
	}
	return s, err
}

// idText accepts a string or an integer, many services using numeric IDs:
// an integer literal's text, however large. A fraction or an exponent is
// refused: 1e3 or 1000.0 is 1000 to some encoders, and the key would
// depend on how the producer's encoder writes it.
func idText(value []byte, kind jsonscan.Kind) (string, error) {
	switch kind {
	case jsonscan.String:
		return nonEmptyText("id", value, kind)
	case jsonscan.Number:
		if bytes.ContainsAny(value, ".eE") {
			return "", invalid("a numeric id must be an integer, not " + truncate(value))
		}
		return string(value), nil
	default:
		return "", invalid("id must be a string or an integer, not " + kind.String())
	}
}

func parseOp(value []byte, kind jsonscan.Kind) (Op, error) {
	if kind == jsonscan.String {
		var buf [16]byte
		text, _ := jsonscan.AppendText(buf[:0], value)
		switch string(text) {
		case string(OpCreate):
			return OpCreate, nil
		case string(OpUpdate):
			return OpUpdate, nil
		case string(OpDelete):
			return OpDelete, nil
		}
	}
	return OpUnknown, invalid("op must be create, update or delete, not " + truncate(value))
}

func parseVersion(value []byte, kind jsonscan.Kind) (int64, error) {
	if kind == jsonscan.Number {
		if v, err := strconv.ParseInt(unsafeString(value), 10, 64); err == nil {
			return v, nil
		}
	}
	return 0, invalid("version must be an integer, not " + truncate(value))
}

// parseStrings reads field, an array of non-empty strings: keys or tags,
// at most max of them.
func parseStrings(field string, value []byte, kind jsonscan.Kind, max int) ([]string, error) {
	if kind != jsonscan.Array {
		return nil, invalid(field + " must be an array of strings, not " + kind.String())
	}
	var out []string
	err := jsonscan.Elements(value, func(v []byte, kind jsonscan.Kind) error {
		if len(out) == max {
			return pastLimit(field, max)
		}
		s, err := nonEmptyText(field+"["+strconv.Itoa(len(out))+"]", v, kind)
		out = append(out, s)
		return err
	})
	if err == nil && len(out) == 0 {
		err = invalid(field + " is empty")
	}
	return out, err
}

func parseTime(value []byte) (time.Time, error) {
	var buf [64]byte
	text, err := jsonscan.AppendText(buf[:0], value)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, unsafeString(text))
	if err != nil {
		// The error keeps the text: give it a copy of its own.
		_, err = time.Parse(time.RFC3339Nano, string(text))
	}
	return t, err
}

// truncate keeps error messages short: the value may be a whole body.
func truncate(value []byte) string {
	const max = 64
	if len(value) > max {
		return strings.ToValidUTF8(string(value[:max]), "") + "…"
	}
	return string(value)
}

// unsafeString views bytes as a string without copying, for parsing only:
// the result must not outlive the call.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// unsafeBytes views a string as bytes without copying; jsonscan only reads.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
