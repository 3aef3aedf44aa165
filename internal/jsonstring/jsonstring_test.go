package jsonstring

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzAppend: a string reads back as encoding/json reads its own encoding
// of it, in characters SQS takes, within MaxBytes.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"cache:<a&b>", "\x00\x1f\"\\", "\uffff\ufffe\u2028", "\xff\xfe", "é\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		std, _ := json.Marshal(s)
		ours := Append(nil, s)
		if err := json.Unmarshal(ours, &got); err != nil || json.Unmarshal(std, &want) != nil || got != want {
			t.Fatalf("%q reads back as %q (%v), want %q", ours, got, err, want)
		}
		if !utf8.Valid(ours) || strings.ContainsAny(string(ours), "\uffff\ufffe") || strings.ContainsFunc(string(ours), func(r rune) bool { return r < ' ' }) {
			t.Fatalf("%q holds characters SQS refuses", ours)
		}
		if len(ours) > MaxBytes(len(s)) {
			t.Fatalf("%q is %d bytes, over MaxBytes(%d) = %d", ours, len(ours), len(s), MaxBytes(len(s)))
		}
	})
}
