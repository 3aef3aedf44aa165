package ratelimit

import (
	"crypto/rand"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// burst sends n concurrent requests and returns how many were allowed and
// the longest retry-after of the denied ones.
func burst(t *testing.T, allow func() (Result, error), n int) (allowed int64, retry time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var count atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r, err := allow()
			if err != nil {
				t.Error(err)
				return
			}
			if r.Allowed {
				count.Add(1)
				if r.RetryAfter != 0 {
					t.Errorf("allowed with retry-after %v", r.RetryAfter)
				}
				return
			}
			mu.Lock()
			retry = max(retry, r.RetryAfter)
			mu.Unlock()
		})
	}
	wg.Wait()
	return count.Load(), retry
}

func TestSlidingWindowAllowsExactlyTheLimit(t *testing.T) {
	l, err := NewSlidingWindow(testenv.Cache(t), 20, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := "rl:{sliding}:" + rand.Text()
	allowed, retry := burst(t, func() (Result, error) { return l.Allow(t.Context(), key) }, 200)
	if allowed != 20 {
		t.Fatalf("%d of 200 concurrent requests allowed, want exactly 20", allowed)
	}
	if retry <= 0 || retry > time.Second {
		t.Fatalf("retry-after %v, want within the 1 s window", retry)
	}
	time.Sleep(retry + 20*time.Millisecond)
	if r, err := l.Allow(t.Context(), key); err != nil || !r.Allowed {
		t.Fatalf("after the retry-after: %+v, %v; want allowed", r, err)
	}
}

func TestTokenBucketAllowsTheCapacityThenRefills(t *testing.T) {
	b, err := NewTokenBucket(testenv.Cache(t), 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	key := "rl:{bucket}:" + rand.Text()
	allowed, retry := burst(t, func() (Result, error) { return b.Allow(t.Context(), key) }, 100)
	if allowed != 10 {
		t.Fatalf("%d of 100 concurrent requests allowed, want exactly the capacity 10", allowed)
	}
	// At 2 tokens a second the next whole token is at most 500 ms away.
	if retry <= 0 || retry > 500*time.Millisecond {
		t.Fatalf("retry-after %v, want within 500 ms", retry)
	}
	time.Sleep(260 * time.Millisecond) // about half a token: still denied, sooner
	r, err := b.Allow(t.Context(), key)
	if err != nil || r.Allowed || r.RetryAfter > 250*time.Millisecond {
		t.Fatalf("after a fractional refill: %+v, %v; want denied with at most 250 ms to wait", r, err)
	}
	time.Sleep(r.RetryAfter + 20*time.Millisecond)
	if r, err := b.Allow(t.Context(), key); err != nil || !r.Allowed {
		t.Fatalf("after the retry-after: %+v, %v; want allowed", r, err)
	}
	if _, err := b.Take(t.Context(), key, 11); err != ErrCost {
		t.Fatalf("a cost above capacity: %v, want ErrCost", err)
	}
}

func TestFixedWindowAllowsExactlyTheLimit(t *testing.T) {
	l, err := NewFixedWindow(testenv.Cache(t), 20, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := "rl:{fixed}:" + rand.Text()
	allowed, retry := burst(t, func() (Result, error) { return l.Allow(t.Context(), key) }, 200)
	if allowed != 20 || retry <= 0 || retry > time.Second {
		t.Fatalf("%d allowed, retry-after %v; want exactly 20 and at most 1 s", allowed, retry)
	}
	time.Sleep(retry + 20*time.Millisecond)
	if r, err := l.Allow(t.Context(), key); err != nil || !r.Allowed || r.Remaining != 19 {
		t.Fatalf("in the next window: %+v, %v", r, err)
	}
}

// TestNonsenseIsRefused needs nothing running: the constructors refuse
// before any command is sent.
func TestNonsenseIsRefused(t *testing.T) {
	window := func(limit int64, window time.Duration) []error {
		_, sliding := NewSlidingWindow(nil, limit, window)
		_, fixed := NewFixedWindow(nil, limit, window)
		return []error{sliding, fixed}
	}
	bucket := func(capacity, rate float64) []error {
		_, err := NewTokenBucket(nil, capacity, rate)
		return []error{err}
	}
	for _, tc := range []struct {
		name  string
		errs  []error
		field string // "" when valid
	}{
		{"limit 0", window(0, time.Second), "limit"},
		{"limit -1", window(-1, time.Second), "limit"},
		{"limit 2^53+1", window(1<<53+1, time.Second), "limit"},
		{"window 0", window(10, 0), "window"},
		{"window -1s", window(10, -time.Second), "window"},
		{"window 999µs", window(10, 999*time.Microsecond), "window"},
		{"limit 1 in 1ms", window(1, time.Millisecond), ""},
		{"capacity 0", bucket(0, 1), "capacity"},
		{"capacity -1", bucket(-1, 1), "capacity"},
		{"capacity NaN", bucket(math.NaN(), 1), "capacity"},
		{"capacity +Inf", bucket(math.Inf(1), 1), "capacity"},
		{"rate 0", bucket(10, 0), "rate"},
		{"rate -2", bucket(10, -2), "rate"},
		{"rate NaN", bucket(10, math.NaN()), "rate"},
		{"rate refilling in 300 years", bucket(1, 1/(300*365.25*24*3600)), "rate"},
		{"half a token a second", bucket(0.5, 0.5), ""},
	} {
		for _, err := range tc.errs {
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("%s: %v, want accepted", tc.name, err)
			case tc.field != "" && (err == nil || !strings.Contains(err.Error(), " "+tc.field+" is ")):
				t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
			}
		}
	}
}

func TestCostOutsideTheBucketIsRefused(t *testing.T) {
	b, err := NewTokenBucket(nil, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, cost := range []float64{0, -1, 10.5, math.NaN(), math.Inf(1)} {
		if _, err := b.Take(t.Context(), "k", cost); !errors.Is(err, ErrCost) {
			t.Errorf("cost %v: %v, want ErrCost", cost, err)
		}
	}
}
