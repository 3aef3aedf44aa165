package invalidate_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

func user(id string) invalidate.Record {
	return invalidate.Record{ID: id, Changes: []events.Change{{Entity: "user", ID: id, OccurredAt: time.Now().Add(-time.Second)}}}
}

func fast() invalidate.Options {
	return invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
}

func TestKeysAreRetriedUntilTheCacheIsBack(t *testing.T) {
	cache := &cachetest.Cache{Fail: func(_ string, attempt int) error {
		if attempt <= 20 { // well past the five attempts of old
			return cachetest.ErrRefused
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rep := invalidate.New(cache, fast()).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{user("1"), user("2")}))
	for _, res := range rep.Results {
		if res.Err != nil || res.Keys[0].Status != invalidate.KeyDeleted {
			t.Fatalf("record %s: %+v", res.Record, res)
		}
	}
	if n := cache.Attempts("cache:user:1"); n != 21 {
		t.Fatalf("the key was tried %d times, want 21", n)
	}
	if rep.Metrics.MaxLag < time.Second {
		t.Fatalf("max lag %v, want the second the changes are old", rep.Metrics.MaxLag)
	}
}

// TestLagRunsFromTheChangeToItsInvalidation: in a bubble of fake time,
// where the deletes take none, the lag of a change that happened 1 s ago
// is that second exactly, and a retry's pause adds to it.
func TestLagRunsFromTheChangeToItsInvalidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rep := invalidate.New(&cachetest.Cache{}, fast()).Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{user("1")}))
		if lag := rep.Metrics.MaxLag; lag != time.Second {
			t.Fatalf("max lag %v, want the 1 s the change is old", lag)
		}

		cache := &cachetest.Cache{Fail: func(_ string, attempt int) error {
			if attempt == 1 {
				return cachetest.ErrRefused
			}
			return nil
		}}
		opts := invalidate.Options{Backoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
		rep = invalidate.New(cache, opts).Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{user("2")}))
		if lag := rep.Metrics.MaxLag; lag < time.Second+50*time.Millisecond || lag > time.Second+100*time.Millisecond {
			t.Fatalf("max lag %v after one retry, want 1 s and its pause (50 to 100 ms)", lag)
		}
	})
}

func TestTransientFailuresLastUntilTheDeadline(t *testing.T) {
	cache := &cachetest.Cache{Fail: func(string, int) error { return cachetest.ErrRefused }}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep := invalidate.New(cache, fast()).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{user("1")}))
	took := time.Since(start)
	res := rep.Results[0]
	if !res.Transient || !errors.Is(res.Err, syscall.ECONNREFUSED) {
		t.Fatalf("result %+v: want a transient failure naming the refused connection", res)
	}
	if took > time.Second || cache.Attempts("cache:user:1") < 10 {
		t.Fatalf("%d tries in %v: want retries until the 300 ms deadline", cache.Attempts("cache:user:1"), took)
	}
	if m := rep.Metrics; m.Failed != 1 || m.Transient != 1 || m.KeysFailed != 1 || m.MaxLag != 0 {
		t.Fatalf("metrics %+v: want one transient failure, no lag (nothing was invalidated)", m)
	}
}

// TestTheDeadlineKeepsWhyTheKeyWasRetried: an attempt cut short by the
// deadline does not hide the failure that kept the key retrying.
func TestTheDeadlineKeepsWhyTheKeyWasRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cache := &cachetest.Cache{Fail: func(_ string, attempt int) error {
		if attempt == 1 {
			return cachetest.ErrRefused
		}
		cancel() // the time runs out during the second attempt
		return ctx.Err()
	}}
	rep := invalidate.New(cache, fast()).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{user("1")}))
	res := rep.Results[0]
	if !res.Transient || !errors.Is(res.Err, syscall.ECONNREFUSED) || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("result %+v: want the deadline and the refused connection before it", res)
	}
}

// TestAStuckAttemptIsRetried: a node that stops answering costs one
// attempt, not the deadline.
func TestAStuckAttemptIsRetried(t *testing.T) {
	cache := &stuckOnce{}
	opts := fast()
	opts.AttemptTimeout = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	rep := invalidate.New(cache, opts).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{user("1")}))
	if res := rep.Results[0]; res.Err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("after %v: %+v, want the key deleted at the second attempt", time.Since(start), res)
	}
}

// stuckOnce deletes keys, the first call stuck until its context ends;
// it has no tags.
type stuckOnce struct {
	invalidate.Cache
	calls int
}

func (s *stuckOnce) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	if s.calls++; s.calls == 1 {
		<-ctx.Done()
		errs := make([]error, len(keys))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	}
	for i := range status {
		status[i] = invalidate.KeyAbsent
	}
	return nil
}

func TestWhatFailsForGoodIsNotRetried(t *testing.T) {
	decodeErr := errMalformed
	cache := &cachetest.Cache{Fail: func(key string, _ int) error {
		if strings.HasPrefix(key, "cache:down:") {
			return cachetest.ErrRefused
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	rep := invalidate.New(cache, fast()).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{
		{ID: "bad-json", Err: decodeErr},
		// One change plans no key, the other's key fails for now: the keys
		// are retried first, and the record with them.
		{ID: "unplanned-and-down", Changes: []events.Change{{Entity: "user"}, {Entity: "down", ID: "1"}}},
		{ID: "unplanned", Changes: []events.Change{{Entity: "user", ID: "2"}, {Entity: "user"}}},
		user("ok"),
	}))
	want := []struct {
		err       error
		transient bool
	}{{errMalformed, false}, {syscall.ECONNREFUSED, true}, {invalidate.ErrPlan, false}, {nil, false}}
	for i, w := range want {
		res := rep.Results[i]
		if !errors.Is(res.Err, w.err) || (w.err == nil) != (res.Err == nil) || res.Transient != w.transient {
			t.Errorf("%s: err %v, transient %v; want %v, %v", res.Record, res.Err, res.Transient, w.err, w.transient)
		}
	}
	// The unplanned record's other key is deleted all the same, once.
	if n := cache.Attempts("cache:user:2"); n != 1 || rep.Results[2].Keys[0].Status != invalidate.KeyDeleted {
		t.Fatalf("the planned key of a record that failed for good: %d tries, %+v", n, rep.Results[2].Keys)
	}
	if m := rep.Metrics; m.Failed != 3 || m.Transient != 1 {
		t.Fatalf("metrics %+v: want 3 failed, 1 of them for now", m)
	}
}

func TestAPanicWhileSendingFailsForGood(t *testing.T) {
	rep := invalidate.New(panicky{}, fast()).Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{user("1")}))
	res := rep.Results[0]
	if res.Transient || !errors.Is(res.Err, invalidate.ErrInternal) || !strings.Contains(res.Err.Error(), "goroutine") {
		t.Fatalf("result %+v: want an internal error with its stack, for good", res)
	}
}

type panicky struct{ invalidate.Cache }

func (panicky) Unlink(context.Context, []string, []invalidate.KeyStatus) []error { panic("cache bug") }

// TestNoPermissionFailsForGood runs against the stack: a user that may not
// touch a key gets NOPERM, which no retry can change, should the rules have
// let the key through.
func TestNoPermissionFailsForGood(t *testing.T) {
	admin := testenv.Cache(t)
	cfg := testenv.CacheConfig(t)
	name, password := "limited-"+strings.ToLower(rand.Text()[:8]), rand.Text()
	// The worker's own rules (WORKER_ACL), but for one key pattern.
	args := append([]string{name, "on", ">" + password, "~allowed:*"}, strings.Fields(testenv.Getenv(t, "WORKER_ACL"))...)
	for addr, node := range admin.Nodes() {
		if err := node.Do(t.Context(), node.B().Arbitrary("ACL", "SETUSER").Args(args...).Build()).Error(); err != nil {
			t.Fatalf("ACL SETUSER on %s: %v", addr, err)
		}
		t.Cleanup(func() { node.Do(context.Background(), node.B().AclDeluser().Username(name).Build()) })
	}
	cfg.Username, cfg.Password = name, password
	limited, err := elasticache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	// The rules allow every key: the server's ACL alone refuses.
	everything, err := invalidate.ParseRules([]byte(`allowedKeys: ["*"]`))
	if err != nil {
		t.Fatal(err)
	}
	rep := invalidate.New(invalidate.Valkey(limited), invalidate.Options{Rules: everything}).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{
		{ID: "denied", Changes: []events.Change{{Keys: []string{"denied:1", "allowed:1"}}}},
	}))
	res := rep.Results[0]
	verr, ok := valkey.IsValkeyErr(errors.Unwrap(res.Err))
	if res.Transient || !ok || !strings.HasPrefix(verr.Error(), "NOPERM") {
		t.Fatalf("result %+v: want NOPERM, for good", res)
	}
	if res.Keys[1].Status == invalidate.KeyFailed {
		t.Fatalf("the allowed key failed: %+v", res.Keys)
	}
	if rep.Metrics.KeysFailed != 1 {
		t.Fatalf("metrics %+v: the denied key was tried more than once or not at all", rep.Metrics)
	}
}

// TestABatchRetriesForItsRetryFor: a batch from a source that retries soon
// itself gives up a key that keeps failing after RetryFor, long before
// its deadline, as failed for now with the cause; the key that passed is
// deleted all the same.
func TestABatchRetriesForItsRetryFor(t *testing.T) {
	cache := &cachetest.Cache{Fail: func(key string, _ int) error {
		if key == "cache:user:down" {
			return cachetest.ErrRefused
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	batch := invalidate.Decoded([]invalidate.Record{user("up"), user("down")})
	batch.RetryFor = 50 * time.Millisecond
	start := time.Now()
	rep := invalidate.New(cache, fast()).Invalidate(ctx, batch)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the batch took %v: it retried until its deadline", took)
	}
	if rep.Results[0].Err != nil || rep.Results[0].Keys[0].Status != invalidate.KeyDeleted {
		t.Fatalf("record up: %+v", rep.Results[0])
	}
	if res := rep.Results[1]; !res.Transient || !errors.Is(res.Err, syscall.ECONNREFUSED) {
		t.Fatalf("record down: %+v, want failed for now, refused", res)
	}
	if n := cache.Attempts("cache:user:down"); n < 2 {
		t.Fatalf("the failing key was tried %d times, want it retried within RetryFor", n)
	}
}
