package endpoint

import (
	"bufio"
	"strings"
	"testing"
)

// TestReadReply reads RESP2 and RESP3 replies whole, one at a time, and
// tells a push from a reply.
func TestReadReply(t *testing.T) {
	replies := []struct {
		raw  string
		push bool
	}{
		{"+OK\r\n", false},
		{"-ERR no\r\n", false},
		{":42\r\n", false},
		{"$5\r\nhello\r\n", false},
		{"$-1\r\n", false},
		{"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", false},
		{"%1\r\n+slots\r\n*2\r\n:0\r\n:16383\r\n", false},
		{"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n", false},
		{">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n", true},
		{"_\r\n", false},
		{"=7\r\ntxt:abc\r\n", false},
	}
	var all string
	for _, r := range replies {
		all += r.raw
	}
	br := bufio.NewReader(strings.NewReader(all))
	for _, want := range replies {
		got, push, err := readReply(br, nil)
		if err != nil || string(got) != want.raw || push != want.push {
			t.Fatalf("read %q (push %v, %v), want %q (push %v)", got, push, err, want.raw, want.push)
		}
	}
}
