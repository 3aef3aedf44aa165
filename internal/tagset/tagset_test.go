package tagset

import (
	"bytes"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestLayoutRoundTrip: a tag's layout as the cache holds it — its key, the
// clock's key, its own fields and a member's registration — is
// testdata/layout.golden.txt (-update rewrites it), and each reads back:
// the registration's clock, its own fields told from a member's. The
// scripts that write the hash are held to it by writethrough's tag tests
// on the stack, which read it with these.
func TestLayoutRoundTrip(t *testing.T) {
	pruneAfter := time.UnixMilli(1_800_000_000_123)
	reg := Registration(1_799_999_999_000_042, pruneAfter)
	var got bytes.Buffer
	fmt.Fprintf(&got, "tag key %q\nclock key %q\nepoch field %q\ncursor field %q\nregistration %q\n",
		Key(DefaultPrefix, "user:1"), Clock(DefaultPrefix), Epoch, Cursor, reg)
	if clock, ok := ClockOf(reg); !ok || clock != 1_799_999_999_000_042 {
		t.Errorf("ClockOf(%q) = %d, %v", reg, clock, ok)
	}
	if _, ok := ClockOf("not a registration"); ok {
		t.Error("ClockOf reads what is no registration")
	}
	if !Own(Epoch) || !Own(Cursor) || Own("cache:user:1") {
		t.Error("a tag's own fields are told from its members by their NUL")
	}
	golden.Check(t, "testdata/layout.golden.txt", got.Bytes(), *update)
}
