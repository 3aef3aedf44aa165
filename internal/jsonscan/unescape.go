package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

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
