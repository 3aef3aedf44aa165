package writethrough

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"
)

type fakeClock struct{ now time.Time }

func (f *fakeClock) Now() time.Time { return f.now }

func TestEnvelopeRoundTrip(t *testing.T) {
	expiry := time.UnixMilli(1795953600123)
	for _, e := range []entry{
		{kind: kindValue, stamp: "abc", version: 42, delta: 1500 * time.Microsecond, expiry: expiry, payload: []byte(`{"a":"x|y"}`)},
		{kind: kindNotFound, stamp: "def", version: 0, expiry: expiry},
		{kind: kindLease, stamp: "token"},
		{kind: kindTagged, stamp: "ghi", version: 3, expiry: expiry, reg: "12:345", tags: []string{"product:1", "a:b|c", "é"}, payload: []byte(`{"x":1}`)},
	} {
		got, err := decodeEntry([]byte(e.encode()))
		if err != nil {
			t.Fatalf("%q: %v", e.encode(), err)
		}
		if got.kind != e.kind || got.stamp != e.stamp || got.version != e.version || got.delta != e.delta ||
			(e.kind != kindLease && !got.expiry.Equal(e.expiry)) || string(got.payload) != string(e.payload) ||
			got.reg != e.reg || !reflect.DeepEqual(got.tags, e.tags) {
			t.Fatalf("round trip of %q = %+v", e.encode(), got)
		}
	}
	for _, garbage := range []string{"", "hello", "wt1|", "wt1|x|s|", "wt1|v|s|1|2", "wt1|v|s|one|2|3|p", "wt1|l|s|extra",
		"wt1|t|s|1|2|3|p", "wt1|t|s|1|2|3|1:2|0||p", "wt1|t|s|1|2|3|1:2|1|9:ab|p", "wt1|t|s|1|2|3|1:2|2|1:a|p", "wt1|t|s|1|2|3|1:2|1|1:ap"} {
		if _, err := decodeEntry([]byte(garbage)); err == nil {
			t.Errorf("decodeEntry(%q) accepted garbage", garbage)
		}
	}
}

func TestXFetchDecision(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	r := math.Exp(-1) // ln(r) = -1: the gap is exactly Δ·β
	c := New[string](nil, Options[string]{Clock: clock, Rand: func() float64 { return r }, Beta: 2})
	e := entry{kind: kindValue, delta: 100 * time.Millisecond, expiry: clock.now.Add(time.Second)}
	for _, tc := range []struct {
		before  time.Duration
		refresh bool
	}{
		{time.Second, false}, {201 * time.Millisecond, false}, {200 * time.Millisecond, true}, {0, true},
	} {
		clock.now = e.expiry.Add(-tc.before)
		if got := c.refreshEarly(e, clock.now); got != tc.refresh {
			t.Errorf("%v before expiry with Δ=100ms β=2: refresh = %v, want %v", tc.before, got, tc.refresh)
		}
	}
	never := New[string](nil, Options[string]{Clock: clock, Rand: func() float64 { return r }, Beta: -1})
	if never.refreshEarly(e, e.expiry) {
		t.Error("β < 0 must turn early refresh off")
	}
}

func TestJitterBounds(t *testing.T) {
	for r, want := range map[float64]time.Duration{0: 90 * time.Second, 0.5: 100 * time.Second, 0.999999: 110 * time.Second} {
		c := New[string](nil, Options[string]{Rand: func() float64 { return r }})
		if got := c.jittered(100 * time.Second); got.Round(time.Second) != want {
			t.Errorf("rand %v: jittered 100s = %v, want %v (±10%%)", r, got, want)
		}
	}
}

func TestLoaderPanicFailsWithItsStack(t *testing.T) {
	var g singleflight.Group
	o, led, err := shared(t.Context(), &g, "k", func(context.Context) outcome[int] { panic("boom") })
	if err != nil || !led {
		t.Fatalf("shared = %v, led %v", err, led)
	}
	if o.err == nil || !strings.Contains(o.err.Error(), "boom") || !strings.Contains(o.err.Error(), "TestLoaderPanicFailsWithItsStack") {
		t.Fatalf("err = %v, want the panic and the stack where it happened", o.err)
	}
}

// TestAJoinerWaitsHalfItsTime: a caller that joined another's load gives up
// on it once half its time is gone, to load itself; the caller running the
// load waits for it.
func TestAJoinerWaitsHalfItsTime(t *testing.T) {
	var g singleflight.Group
	release, started := make(chan struct{}), make(chan struct{})
	leader := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, _, err := shared(ctx, &g, "k", func(context.Context) outcome[int] { close(started); <-release; return outcome[int]{v: 1} })
		leader <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, _, err := shared(ctx, &g, "k", func(context.Context) outcome[int] { return outcome[int]{v: 2} }); !errors.Is(err, errWaitedOut) || ctx.Err() != nil {
		t.Fatalf("the joiner: %v, ctx %v; want errWaitedOut before its deadline", err, ctx.Err())
	}
	time.Sleep(1200 * time.Millisecond) // past the leader's half
	close(release)
	if err := <-leader; err != nil {
		t.Fatalf("the leader: %v, want its own load's outcome", err)
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want Stored
		ok   bool
	}{
		{entry{kind: kindLease, stamp: "s"}.encode(), Stored{Lease: true}, true},
		{entry{kind: kindValue, stamp: "s", version: 7, payload: []byte(`{"a":1}`)}.encode(), Stored{Version: 7}, true},
		{entry{kind: kindNotFound, stamp: "s", version: 3}.encode(), Stored{NotFound: true, Version: 3}, true},
		{`{"version":9}`, Stored{}, false},
		{"wt1|x|s", Stored{}, false},
		{entry{kind: kindTagged, stamp: "s", version: 2, reg: "17:99", tags: []string{"a", "b|c"}, payload: []byte(`[]`)}.encode(),
			Stored{Version: 2, Tags: []string{"a", "b|c"}, TagClock: 17}, true},
	} {
		got, ok := Describe([]byte(c.raw))
		if !reflect.DeepEqual(got, c.want) || ok != c.ok {
			t.Errorf("Describe(%q) = %+v, %v; want %+v, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}
