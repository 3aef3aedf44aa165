package leaderboard

import (
	"crypto/rand"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func board(t *testing.T, opts Options) (*Board, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	opts.Now = c.now
	b, err := New(testenv.Cache(t), "lb:{test}:"+rand.Text(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

func TestEarlierAchieverRanksHigher(t *testing.T) {
	b, c := board(t, Options{Resolution: time.Millisecond, TimeBits: 40})
	start := c.t
	at := func(d time.Duration, member string, points int64) {
		c.t = start.Add(d)
		if err := b.Set(t.Context(), member, points); err != nil {
			t.Fatal(err)
		}
	}
	at(100*time.Millisecond, "erin", 99)
	at(1200*time.Millisecond, "alice", 100) // same second as bob, earlier
	at(1700*time.Millisecond, "bob", 100)
	at(2500*time.Millisecond, "carol", 100) // a later second
	at(3*time.Second, "dave", 150)
	top, err := b.Top(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{"dave", 150, 1}, {"alice", 100, 2}, {"bob", 100, 3}, {"carol", 100, 4}, {"erin", 99, 5}}
	if len(top) != len(want) {
		t.Fatalf("top = %+v", top)
	}
	for i := range want {
		if top[i] != want[i] {
			t.Fatalf("top[%d] = %+v, want %+v (all: %+v)", i, top[i], want[i], top)
		}
	}
	// Reaching a score again stamps the new time: erin passes no one with
	// 100 reached last.
	c.t = start.Add(4 * time.Second)
	if p, err := b.Add(t.Context(), "erin", 1); err != nil || p != 100 {
		t.Fatalf("Add = %d, %v", p, err)
	}
	if r, ok, err := b.Rank(t.Context(), "erin"); err != nil || !ok || r != 5 {
		t.Fatalf("erin's rank = %d %v %v, want 5", r, ok, err)
	}
	if _, ok, _ := b.Rank(t.Context(), "nobody"); ok {
		t.Fatal("a missing member has a rank")
	}
}

func TestPrecisionLimits(t *testing.T) {
	b, c := board(t, Options{}) // 1 s units, 32 time bits
	max := b.MaxPoints()
	if max != 1<<21-1 {
		t.Fatalf("MaxPoints = %d, want 2^21-1 with 32 time bits", max)
	}
	if err := b.Set(t.Context(), "first", max); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Second)
	if err := b.Set(t.Context(), "second", max); err != nil {
		t.Fatal(err)
	}
	top, _ := b.Top(t.Context(), 2)
	if len(top) != 2 || top[0].Member != "first" || top[0].Points != max || top[1].Points != max {
		t.Fatalf("at MaxPoints: %+v, want first then second, points exact", top)
	}
	if err := b.Set(t.Context(), "over", max+1); !errors.Is(err, ErrPointsOutOfRange) {
		t.Fatalf("Set(MaxPoints+1) = %v, want ErrPointsOutOfRange", err)
	}
	if _, err := b.Add(t.Context(), "first", 1); !errors.Is(err, ErrPointsOutOfRange) {
		t.Fatalf("Add past MaxPoints = %v, want ErrPointsOutOfRange", err)
	}
	if _, err := b.Add(t.Context(), "first", -max-1); !errors.Is(err, ErrPointsOutOfRange) {
		t.Fatalf("Add below 0 = %v, want ErrPointsOutOfRange", err)
	}
	// Why the limit: at MaxPoints every second has its own score; one point
	// more and some adjacent seconds round to the same score.
	collisions := func(points int64) (n int) {
		for u := range int64(1000) {
			f1 := float64(1<<32-1-u) / math.Exp2(32)
			f2 := float64(1<<32-2-u) / math.Exp2(32)
			if float64(points)+f1 == float64(points)+f2 {
				n++
			}
		}
		return n
	}
	if n := collisions(max); n != 0 {
		t.Fatalf("at MaxPoints %d adjacent seconds collide, want none", n)
	}
	if n := collisions(max + 1); n == 0 {
		t.Fatal("past MaxPoints no adjacent seconds collide: the documented bound is wrong")
	}
}

func TestConcurrentAdds(t *testing.T) {
	b, _ := board(t, Options{})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := b.Add(t.Context(), "p", 2); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p, ok, err := b.Points(t.Context(), "p"); err != nil || !ok || p != 100 {
		t.Fatalf("points = %d %v %v, want 100", p, ok, err)
	}
}

// TestNonsenseIsRefused needs nothing running: New refuses before any
// command is sent.
func TestNonsenseIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		key   string
		opts  Options
		field string // "" when valid
	}{
		{"defaults", "lb", Options{}, ""},
		{"empty key", "", Options{}, "key"},
		{"negative resolution", "lb", Options{Resolution: -time.Second}, "Resolution"},
		{"53 time bits", "lb", Options{TimeBits: 53}, "TimeBits"},
		{"52 time bits", "lb", Options{TimeBits: 52}, ""},
	} {
		b, err := New(nil, tc.key, tc.opts)
		switch {
		case tc.field == "" && (err != nil || b == nil):
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), " "+tc.field+" is ")):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
}

func TestTopOfNoneSendsNothing(t *testing.T) {
	b, err := New(nil, "lb", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{0, -1} {
		if top, err := b.Top(t.Context(), n); err != nil || len(top) != 0 {
			t.Errorf("Top(%d) = %v, %v; want none", n, top, err)
		}
	}
}
