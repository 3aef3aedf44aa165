package invalidate

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// resp is a command or a reply as RESP puts it on the wire.
func resp(parts ...any) string {
	var b strings.Builder
	for _, p := range parts {
		switch p := p.(type) {
		case []string:
			fmt.Fprintf(&b, "*%d\r\n", len(p))
			for _, s := range p {
				fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s)
			}
		case int:
			fmt.Fprintf(&b, ":%d\r\n", p)
		case string: // a bare header
			b.WriteString(p)
		}
	}
	return b.String()
}

func TestTheModelCountsTheBytesOnTheWire(t *testing.T) {
	key := strings.Repeat("k", 3000)
	members := make([]Member, 1500)
	var fields []string
	for i := range members {
		members[i] = Member{Key: fmt.Sprintf("cache:product:%06d", i), Registration: "17:1767225600000"}
		fields = append(fields, members[i].Key, members[i].Registration)
	}
	sha := strings.Repeat("a", 40)
	forget := func(ms []Member) string {
		args := []string{"EVALSHA", sha, "1", "cache:tag:t"}
		for _, m := range ms {
			args = append(args, m.Key, m.Registration)
		}
		return resp(args, len(ms))
	}
	for _, tc := range []struct {
		name  string
		model cost
		wire  string
	}{
		{"unlink of a short key", unlinkCost("cache:user:1"), resp([]string{"UNLINK", "cache:user:1"}, 1)},
		{"unlink of 3,000 bytes", unlinkCost(key), resp([]string{"UNLINK", key}, 1)},
		{"a page", pageCost("cache:tag:t", 1767225600123, 0, 1000, members, 4242),
			resp([]string{"EVALSHA", sha, "1", "cache:tag:t", "1767225600123", "0", "1000"}, "*2\r\n$4\r\n4242\r\n", fields)},
		{"forgetting in chunks", forgetCost("cache:tag:t", members), ""},
	} {
		want := max(1, float64(len(tc.wire))/1024)
		if tc.wire == "" { // a command per chunk
			want = 0
			for lo := 0; lo < len(members); lo += forgetChunk {
				chunk := forget(members[lo:min(lo+forgetChunk, len(members))])
				tc.wire += chunk
				want += max(1, float64(len(chunk))/1024)
			}
		}
		// The reply's number may be wider than the model's guess of it.
		if math.Abs(tc.model.ecpus-want) > 0.01*want || math.Abs(float64(tc.model.bytes-len(tc.wire))) > 0.01*float64(len(tc.wire)) {
			t.Errorf("%s: the model says %.3f ECPUs of %d bytes, the wire %.3f of %d", tc.name, tc.model.ecpus, tc.model.bytes, want, len(tc.wire))
		}
	}
}
