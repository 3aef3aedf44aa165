package ratelimit

import (
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/internal/testenv"
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
	l := &SlidingWindow{Client: testenv.Cache(t), Limit: 20, Window: time.Second}
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
	b := &TokenBucket{Client: testenv.Cache(t), Capacity: 10, Rate: 2}
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
	l := &FixedWindow{Client: testenv.Cache(t), Limit: 20, Window: time.Second}
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
