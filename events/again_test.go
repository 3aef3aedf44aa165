package events

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/internal/golden"
)

// TestAgainMessagesRoundTrip: the again messages, as sent, are
// testdata/again.golden.jsonl, a message a line (-update rewrites it), and
// read back as the worker's own changes of the same names (valid UTF-8:
// the rules plan no other).
func TestAgainMessagesRoundTrip(t *testing.T) {
	var sent bytes.Buffer
	for _, c := range []struct {
		names []string
		tags  bool
		end   string
	}{
		{[]string{"cache:user:1", "cache:<a&b>", "ctl\x01\x1f", `quote"\`, "\uffff\ufffe", "é😀"}, false, AgainEnd},
		{[]string{"user:1", "list"}, true, FailoverEnd},
	} {
		for m := range AgainMessages(c.names, c.tags, 1<<10) {
			body := string(m.Body) + c.end
			sent.WriteString(body + "\n")
			changes, err := DecodeSQSBody("m", body, "")
			if err != nil || len(changes) != 1 {
				t.Fatalf("%s reads back as %+v, %v", body, changes, err)
			}
			got := changes[0].Keys
			if c.tags {
				got = changes[0].Tags
			}
			if !slices.Equal(got, m.Names) || !changes[0].SecondDelete || changes[0].Failover != (c.end == FailoverEnd) {
				t.Errorf("%s reads back as %+v, want %q", body, changes[0], m.Names)
			}
		}
	}
	golden.Check(t, "testdata/again.golden.jsonl", sent.Bytes(), *update)
}

// TestAgainMessagesAreChunked: at most maxAgainNames names a message, and
// limit bytes as sent with the longer end; a name alone over it goes alone.
func TestAgainMessagesAreChunked(t *testing.T) {
	keys := make([]string, 1200)
	for i := range keys {
		keys[i] = "cache:item:" + strconv.Itoa(i)
	}
	msgs := slices.Collect(AgainMessages(keys, false, 256<<10))
	if len(msgs) != 3 || len(msgs[0].Names) != maxAgainNames || len(msgs[2].Names) != 200 {
		t.Fatalf("%d messages, want 500 + 500 + 200 keys", len(msgs))
	}
	long := make([]string, 3)
	for i := range long {
		long[i] = strings.Repeat("k", 100<<10)
	}
	if msgs := slices.Collect(AgainMessages(long, true, 256<<10)); len(msgs) != 2 || len(msgs[0].Names) != 2 || !strings.HasPrefix(string(msgs[1].Body), `{"tags":[`) {
		t.Fatalf("three tags of 100 KiB in %d messages, want two in the first, one in the second", len(msgs))
	}
	for m := range AgainMessages(keys, false, 1<<10) {
		body := string(m.Body) + FailoverEnd
		changes, err := DecodeSQSBody("m", body, "")
		if err != nil || len(body) > 1<<10 || len(changes) != 1 || !slices.Equal(changes[0].Keys, m.Names) {
			t.Fatalf("%s (%d bytes, %v): want its keys, within 1 KiB", body, len(body), err)
		}
	}
	if n := len(string(slices.Collect(AgainMessages([]string{"\x01\x01"}, false, 1<<10))[0].Body) + FailoverEnd); n > MaxAgainBytes(2) {
		t.Fatalf("a name of two control characters takes %d bytes, over MaxAgainBytes(2) = %d", n, MaxAgainBytes(2))
	}
}
