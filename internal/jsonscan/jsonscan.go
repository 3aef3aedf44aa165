package jsonscan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every error about malformed JSON.
var ErrSyntax = errors.New("invalid JSON")

// ErrNoMember is MemberElements' error for an object without the member.
var ErrNoMember = errors.New("no such member")

// maxDepth matches encoding/json, which refuses deeper nesting.
const maxDepth = 10000

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
	start := skipSpace(data, 0)
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
		return elements(data, skipSpace(data, i+1), 1, skimValue, fn)
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
	return members(data, skipSpace(data, i+1), value)
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
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return i, syntaxErr(i, "want ':' after an object key")
		}
		end, err := value(key, skipSpace(data, i+1))
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
	return eachElement(data, skipSpace(data, i+1), fn)
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
		if i = skipSpace(data, end); i < len(data) && data[i] == ']' {
			return i + 1, nil
		}
		if i >= len(data) || data[i] != ',' {
			return i, syntaxErr(i, "want ',' or ']'")
		}
		i = skipSpace(data, i+1)
	}
}

// open skips to the first token inside the object or array that data must be.
func open(data []byte, bracket byte, want Kind) (int, error) {
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == bracket {
		return skipSpace(data, i+1), nil
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
	i := skipSpace(data, end)
	switch {
	case i >= len(data):
		return 0, syntaxErr(i, "unexpected end, want ',' or '"+string(closing)+"'")
	case data[i] == closing:
		return -(i + 1), nil
	case data[i] == ',':
		return skipSpace(data, i+1), nil
	default:
		return 0, syntaxErr(i, "want ',' or '"+string(closing)+"'")
	}
}

// trailing checks that only whitespace follows the value ending at end.
func trailing(data []byte, end int) error {
	if rest := skipSpace(data, end); rest != len(data) {
		return syntaxErr(rest, "data after the value")
	}
	return nil
}

// Text decodes a raw string value (with its quotes) into a Go string.
func Text(raw []byte) (string, error) {
	if plain, ok := plainContent(raw); ok {
		return string(plain), nil
	}
	b, err := AppendText(nil, raw)
	return string(b), err
}

// AppendText appends the decoded content of a raw string value (with its
// quotes) to dst, replacing invalid UTF-8 and lone surrogates with U+FFFD.
func AppendText(dst, raw []byte) ([]byte, error) {
	if plain, ok := plainContent(raw); ok {
		return append(dst, plain...), nil
	}
	dst, end, err := AppendStringAt(dst, raw, 0)
	if err == nil && end != len(raw) {
		err = syntaxErr(end, "data after the string")
	}
	return dst, err
}

// AppendStringAt appends the decoded content of the string value that
// starts at data[i] to dst, as AppendText does, validating it as it goes,
// and returns the index after its closing quote.
func AppendStringAt(dst, data []byte, i int) ([]byte, int, error) {
	if i >= len(data) || data[i] != '"' {
		return dst, i, syntaxErr(i, "not a string")
	}
	for r := i + 1; r < len(data); {
		// Plain ASCII bytes are copied up to eight at a time, up to the
		// first escape or other byte that needs a look of its own: an
		// escaped JSON body inside another is mostly such runs.
		if len(data)-r >= 8 {
			x := binary.LittleEndian.Uint64(data[r:])
			n := 8
			if m := specials(x) | x&highs; m != 0 {
				n = bits.TrailingZeros64(m) / 8
			}
			dst = append(dst, data[r:r+n]...)
			if r += n; n == 8 {
				continue
			}
		}
		c := data[r]
		switch {
		case c == '"':
			return dst, r + 1, nil
		case c == '\\':
			if r+1 >= len(data) {
				return dst, r, syntaxErr(r, "unfinished escape")
			}
			switch data[r+1] {
			case '"', '\\', '/':
				dst = append(dst, data[r+1])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				// A quote is no hex digit: hex4 stops inside the string.
				rr := hex4(data[r+2:])
				if rr < 0 {
					return dst, r, syntaxErr(r, "bad \\u escape")
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					if r+1 < len(data) && data[r] == '\\' && data[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(data[r+2:])); dec != unicode.ReplacementChar {
							r += 6
							dst = utf8.AppendRune(dst, dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default:
				return dst, r, syntaxErr(r, "bad escape")
			}
			r += 2
		case c < ' ':
			return dst, r, syntaxErr(r, "control character in string")
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(data[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst, len(data), syntaxErr(i, "unterminated string")
}

// plainContent returns the content of a quoted string that needs no
// decoding: no escapes and valid UTF-8.
func plainContent(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	if special(s) < len(s) || !utf8.Valid(s) {
		return nil, false
	}
	return s, true
}

func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

func skipSpace(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skimValue finds the end of the value starting at d[i] as scanValue does,
// but in an object or array it only follows strings and brackets: a
// record of a Lambda payload, most of it an escaped body, is skimmed in
// about two thirds of the time scanning takes.
func skimValue(d []byte, i, depth int) (Kind, int, error) {
	if i >= len(d) || d[i] != '{' && d[i] != '[' {
		return scanValue(d, i, depth)
	}
	kind, start, nested := Object, i, 0
	if d[i] == '[' {
		kind = Array
	}
	for i < len(d) {
		switch d[i] {
		case '"':
			i = skimString(d, i)
			continue
		case '{', '[':
			nested++
		case '}', ']':
			if nested--; nested == 0 {
				return kind, i + 1, nil
			}
		}
		i++
	}
	return Invalid, i, syntaxErr(start, "unterminated "+kind.String())
}

// skimString returns the index after the closing quote of the string that
// starts at d[i], or len(d) when there is none.
func skimString(d []byte, i int) int {
	for i++; i < len(d); {
		if len(d)-i >= 8 {
			x := binary.LittleEndian.Uint64(d[i:])
			q, b := x^'"'*ones, x^'\\'*ones
			m := ((q-ones)&^q | (b-ones)&^b) & highs
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		switch d[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return len(d)
}

// scanValue validates the value starting at d[i] and returns its kind and end.
func scanValue(d []byte, i, depth int) (Kind, int, error) {
	if i >= len(d) {
		return Invalid, i, syntaxErr(i, "unexpected end, want a value")
	}
	switch c := d[i]; {
	case c == '"':
		end, err := scanString(d, i)
		return String, end, err
	case c == '{':
		end, err := scanObject(d, i, depth+1)
		return Object, end, err
	case c == '[':
		end, err := scanArray(d, i, depth+1)
		return Array, end, err
	case c == 't':
		end, err := scanWord(d, i, "true")
		return True, end, err
	case c == 'f':
		end, err := scanWord(d, i, "false")
		return False, end, err
	case c == 'n':
		end, err := scanWord(d, i, "null")
		return Null, end, err
	case c == '-' || ('0' <= c && c <= '9'):
		end, err := scanNumber(d, i)
		return Number, end, err
	default:
		return Invalid, i, syntaxErr(i, "unexpected character, want a value")
	}
}

func scanWord(d []byte, i int, word string) (int, error) {
	if len(d)-i < len(word) || string(d[i:i+len(word)]) != word {
		return i, syntaxErr(i, "bad literal, want "+word)
	}
	return i + len(word), nil
}

func scanNumber(d []byte, i int) (int, error) {
	start := i
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return i, syntaxErr(start, "bad number")
	}
	if i < len(d) && d[i] == '.' {
		if j := digits(d, i+1); j > i+1 {
			i = j
		} else {
			return i, syntaxErr(start, "bad number fraction")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if j := digits(d, i); j > i {
			i = j
		} else {
			return i, syntaxErr(start, "bad number exponent")
		}
	}
	return i, nil
}

func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// scanString validates the string starting at the quote d[i] and returns
// the index after its closing quote.
func scanString(d []byte, i int) (int, error) {
	start := i
	i++
	for {
		// Escaped JSON inside a string has a short run between escapes:
		// the next eight bytes are looked at here, special called only
		// for longer runs.
		if len(d)-i >= 8 {
			if m := specials(binary.LittleEndian.Uint64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
			} else {
				i += 8 + special(d[i+8:])
			}
		} else {
			i += special(d[i:])
		}
		if i >= len(d) {
			return i, syntaxErr(start, "unterminated string")
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(d) {
				return i, syntaxErr(i, "unterminated string")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(d[i+2:]) < 0 {
					return i, syntaxErr(i, "bad \\u escape")
				}
				i += 6
			default:
				return i, syntaxErr(i, "bad escape")
			}
		default: // a control character
			return i, syntaxErr(i, "control character in string")
		}
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special returns the index of the first quote, backslash or control
// character in s, or len(s). The first bytes are looked at eight at a
// time, which is quickest for the short runs between escapes in a change
// message inside an SNS envelope. Beyond them, in the long base64 runs
// that make up most of an envelope, each window of s has its quote and
// backslash found by the vectorised bytes.IndexByte and is then checked for
// control characters. Windows keep the cost of a call to the length of the
// run it returns, plus one window: searching all of s for the next quote
// made a long string with many escapes quadratic.
func special(s []byte) int {
	const short, window = 16, 256
	i := 0
	for ; i < short && len(s)-i >= 8; i += 8 {
		if m := specials(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i += window {
		w := s[i:min(i+window, len(s))]
		end := len(w)
		if q := bytes.IndexByte(w, '"'); q >= 0 {
			end = q
		}
		if b := bytes.IndexByte(w[:end], '\\'); b >= 0 {
			end = b
		}
		if c := control(w[:end]); c < end || end < len(w) {
			return i + c
		}
	}
	return len(s)
}

// specials has the high bit set of each byte of x that is a quote, a
// backslash or below 0x20, and maybe of bytes above one that is: borrows
// only carry upwards, so the lowest set bit is exact, and so is zero.
func specials(x uint64) uint64 {
	q, b := x^'"'*ones, x^'\\'*ones
	return ((q-ones)&^q | (b-ones)&^b | (x-' '*ones)&^x) & highs
}

// control returns the index of the first byte below 0x20 in s, or len(s).
func control(s []byte) int {
	j := 0
	// Control characters are rare: look at 32 bytes per branch, then find
	// the exact one eight bytes at a time.
	for ; len(s)-j >= 32; j += 32 {
		a, b := binary.LittleEndian.Uint64(s[j:]), binary.LittleEndian.Uint64(s[j+8:])
		c, d := binary.LittleEndian.Uint64(s[j+16:]), binary.LittleEndian.Uint64(s[j+24:])
		if ((a-' '*ones)&^a|(b-' '*ones)&^b|(c-' '*ones)&^c|(d-' '*ones)&^d)&highs != 0 {
			break
		}
	}
	for ; len(s)-j >= 8; j += 8 {
		if m := (binary.LittleEndian.Uint64(s[j:]) - ' '*ones) &^ binary.LittleEndian.Uint64(s[j:]) & highs; m != 0 {
			return j + bits.TrailingZeros64(m)/8
		}
	}
	for ; j < len(s); j++ {
		if s[j] < ' ' {
			return j
		}
	}
	return len(s)
}

func scanObject(d []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxErr(i, "nested too deeply")
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return i, syntaxErr(i, "want an object key")
		}
		end, err := scanString(d, i)
		if err != nil {
			return end, err
		}
		i = skipSpace(d, end)
		if i >= len(d) || d[i] != ':' {
			return i, syntaxErr(i, "want ':' after an object key")
		}
		if _, i, err = scanValue(d, skipSpace(d, i+1), depth); err != nil {
			return i, err
		}
		i = skipSpace(d, i)
		if i >= len(d) {
			return i, syntaxErr(i, "unterminated object")
		}
		switch d[i] {
		case '}':
			return i + 1, nil
		case ',':
			i = skipSpace(d, i+1)
		default:
			return i, syntaxErr(i, "want ',' or '}' in an object")
		}
	}
}

func scanArray(d []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxErr(i, "nested too deeply")
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if _, i, err = scanValue(d, i, depth); err != nil {
			return i, err
		}
		i = skipSpace(d, i)
		if i >= len(d) {
			return i, syntaxErr(i, "unterminated array")
		}
		switch d[i] {
		case ']':
			return i + 1, nil
		case ',':
			i = skipSpace(d, i+1)
		default:
			return i, syntaxErr(i, "want ',' or ']' in an array")
		}
	}
}
