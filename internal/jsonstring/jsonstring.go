// Package jsonstring writes a JSON string as short as it goes and as SQS
// takes it, for the messages the worker builds byte by byte: the
// second-delete messages, sized as they are written, and its metrics.
package jsonstring

import "unicode/utf8"

// Append appends s as a JSON string: quotes, backslashes and control
// characters escaped, but not <, > and & (encoding/json writes each as six
// bytes), U+FFFE and U+FFFF escaped too (SQS refuses them raw), invalid
// UTF-8 as U+FFFD, as encoding/json has it.
func Append(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < ' ':
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, `\ufffd`...)
			case r == 0xFFFE || r == 0xFFFF:
				b = append(b, '\\', 'u', 'f', 'f', 'f', hex[r&15])
			default:
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(b, '"')
}

// MaxBytes is the most bytes Append writes for a string of n bytes: a
// control character takes six (\u0001).
func MaxBytes(n int) int { return 6*n + 2 }
