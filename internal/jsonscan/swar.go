package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// The SWAR checks look at the eight bytes of a uint64 at once: ones has
// a 1 in each byte, highs the high bit of each.
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
