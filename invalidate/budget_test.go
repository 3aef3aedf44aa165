package invalidate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
)

// sends records when each key was sent, by the fake clock of a bubble.
type sends struct {
	mu    sync.Mutex
	start time.Time
	at    map[string]time.Duration
	count []time.Duration // one per key, in order sent
}

func (s *sends) hook(_ context.Context, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.at[k] = time.Since(s.start)
		s.count = append(s.count, s.at[k])
	}
}

func (s *sends) when(key string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[key]
}

func keysRecord(id string, second bool, keys ...string) invalidate.Record {
	return invalidate.Record{ID: id, Changes: []events.Change{{Keys: keys, SecondDelete: second}}}
}

func TestTheBudgetPacesWhatIsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget, n = 1000, 5000
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		opts := fast()
		opts.ECPUPerSecond = budget
		inv := invalidate.New(&cachetest.Cache{Unlinked: s.hook}, opts)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("cache:k%d", i)
		}
		rep := inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("1", false, keys...)}))
		if err := rep.Results[0].Err; err != nil {
			t.Fatal(err)
		}
		if rep.Metrics.ECPUs != n {
			t.Fatalf("%d ECPUs counted, want %d: an UNLINK of a short key is 1", rep.Metrics.ECPUs, n)
		}
		// A second's budget, a burst's and one chunk of 500 at most in any
		// second.
		for i, at := range s.count {
			j := i
			for j < len(s.count) && s.count[j] < at+time.Second {
				j++
			}
			if j-i > budget+budget/10+500 {
				t.Fatalf("%d keys sent in the second from %v, budget %d a second", j-i, at, budget)
			}
		}
		if took := time.Since(s.start); took < 4*time.Second {
			t.Fatalf("%d ECPUs took %v at %d a second", n, took, budget)
		}
	})
}

// A tag being paged at the budget holds a first delete back by a chunk at
// most, and a second delete by the tag's pages waiting, until it has
// waited its turn: a promotion a second.
func TestFirstDeletesGoBeforeTagsAndSecondDeletesLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget = 1000
		s := &sends{start: time.Now(), at: map[string]time.Duration{}}
		cache := &cachetest.Cache{Unlinked: s.hook}
		entries(cache, "cache:tag:big", 10_000)
		opts := fast()
		opts.ECPUPerSecond = budget
		inv := invalidate.New(cache, opts)
		var wg sync.WaitGroup
		var tagDone time.Duration
		wg.Go(func() {
			rep := inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{tagged("tag", "big")}))
			if err := rep.Results[0].Err; err != nil {
				t.Error(err)
			}
			tagDone = time.Since(s.start)
		})
		time.Sleep(2 * time.Second)
		asked := time.Since(s.start)
		wg.Go(func() {
			inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("second", true, "cache:again")}))
		})
		time.Sleep(10 * time.Millisecond)
		inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("first", false, "cache:fresh")}))
		wg.Wait()
		if waited := s.when("cache:fresh") - asked; waited > 700*time.Millisecond {
			t.Errorf("the first delete waited %v behind the tag: more than a chunk's 500 ECPUs at %d a second", waited, budget)
		}
		if tagDone < 9*time.Second {
			t.Fatalf("the tag of 10,000 took %v at %d ECPUs a second", tagDone, budget)
		}
		if waited := s.when("cache:again") - asked; waited < time.Second || waited > 3*time.Second {
			t.Errorf("the second delete waited %v behind the tag's pages, want 1 to 3 s: last, but not until the tag is done (%v)", waited, tagDone)
		}
	})
}

func TestAThrottledKeyIsRetriedAndCounted(t *testing.T) {
	throttled := cachetest.Reply("ERR Throttled: ECPU limit") // the text is AWS's to choose; its word is what counts
	cache := &cachetest.Cache{Fail: func(key string, attempt int) error {
		if key == "cache:k0" && attempt == 1 {
			return throttled
		}
		return nil
	}}
	opts := fast()
	opts.ECPUPerSecond = 1000
	rep := invalidate.New(cache, opts).Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{keysRecord("1", false, "cache:k0", "cache:k1")}))
	if err := rep.Results[0].Err; err != nil {
		t.Fatalf("a throttled key is retried until it passes: %v", err)
	}
	if rep.Metrics.Throttled != 1 {
		t.Fatalf("%d throttling replies counted, want 1", rep.Metrics.Throttled)
	}
}
