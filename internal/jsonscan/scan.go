package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// maxDepth matches encoding/json, which refuses deeper nesting.
const maxDepth = 10000

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

func scanObject(d []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxErr(i, "nested too deeply")
	}
	i = SkipSpace(d, i+1)
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
		i = SkipSpace(d, end)
		if i >= len(d) || d[i] != ':' {
			return i, syntaxErr(i, "want ':' after an object key")
		}
		if _, i, err = scanValue(d, SkipSpace(d, i+1), depth); err != nil {
			return i, err
		}
		i = SkipSpace(d, i)
		if i >= len(d) {
			return i, syntaxErr(i, "unterminated object")
		}
		switch d[i] {
		case '}':
			return i + 1, nil
		case ',':
			i = SkipSpace(d, i+1)
		default:
			return i, syntaxErr(i, "want ',' or '}' in an object")
		}
	}
}

func scanArray(d []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxErr(i, "nested too deeply")
	}
	i = SkipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if _, i, err = scanValue(d, i, depth); err != nil {
			return i, err
		}
		i = SkipSpace(d, i)
		if i >= len(d) {
			return i, syntaxErr(i, "unterminated array")
		}
		switch d[i] {
		case ']':
			return i + 1, nil
		case ',':
			i = SkipSpace(d, i+1)
		default:
			return i, syntaxErr(i, "want ',' or ']' in an array")
		}
	}
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace: a decoder reading a text cut short looks past it.
func SkipSpace(d []byte, i int) int {
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
