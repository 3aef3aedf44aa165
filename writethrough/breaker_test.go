package writethrough

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// lockedClock is a fake clock that goroutines may read while a test moves it.
type lockedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *lockedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *lockedClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestBreaker(t *testing.T) {
	clock := &lockedClock{now: time.Now()}
	b := breaker{threshold: 3, coolDown: time.Second, clock: clock}
	call := func(a answer) (probe, ok bool) {
		probe, ok = b.allow()
		if ok {
			b.done(probe, a)
		}
		return probe, ok
	}
	for range 2 {
		call(down)
	}
	call(up) // an answer starts the count again
	for i := range 3 {
		if _, ok := call(down); !ok {
			t.Fatalf("call %d refused before 3 downs in a row", i+1)
		}
	}
	if _, ok := b.allow(); ok {
		t.Fatal("open after 3 downs in a row, yet a call was let through before the cool-down")
	}
	clock.add(time.Second)
	probe, ok := b.allow()
	if !probe || !ok {
		t.Fatalf("after the cool-down: probe %v, ok %v; want the probe", probe, ok)
	}
	if _, ok := b.allow(); ok {
		t.Fatal("a second call was let through while the probe is in flight")
	}
	b.done(true, down)
	clock.add(time.Second / 2)
	if _, ok := b.allow(); ok {
		t.Fatal("a failed probe did not start another cool-down")
	}
	clock.add(time.Second / 2)
	probe, _ = b.allow()
	b.done(probe, unknown) // its caller gave up: the next call probes at once
	if probe, ok = b.allow(); !probe || !ok {
		t.Fatalf("after a probe that told nothing: probe %v, ok %v", probe, ok)
	}
	b.done(probe, up)
	for range 10 {
		if probe, ok := call(up); probe || !ok {
			t.Fatalf("closed by the probe's answer, yet probe %v, ok %v", probe, ok)
		}
	}
	if !b.wary() {
		t.Fatal("not wary right after the cache was found down")
	}
	clock.add(waryFor)
	if b.wary() {
		t.Fatalf("still wary %v after the last down", waryFor)
	}

	never := breaker{clock: clock}
	for range 100 {
		if _, ok := never.allow(); !ok {
			t.Fatal("a breaker of threshold 0 opened")
		}
		never.done(false, down)
	}
}

// TestMissesAreNotDown: misses, fills and values that no longer decode are
// answers (what counts as down: cacheerr.Down).
func TestMissesAreNotDown(t *testing.T) {
	client := testenv.Cache(t)
	// A breaker that opens at the first down stays closed through them.
	c := New[product](client, Options[product]{BreakerThreshold: 1})
	k := key(t)
	if err := client.Do(t.Context(), client.B().Set().Key(k).Value("not an envelope").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{k, key(t)} {
		if _, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "p"}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if c.breaker.isOpen.Load() || c.breaker.wary() {
		t.Fatal("a miss or an undecodable value counted as the cache down")
	}
}
