package writethrough

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// source is a database of products for GetMany's loader: every key but
// those named missing exists; it counts the loader's calls and their keys.
type source struct {
	mu      sync.Mutex
	calls   [][]string
	missing map[string]bool
	fail    func(keys []string) error
}

func (s *source) load(_ context.Context, keys []string) (map[string]product, error) {
	s.mu.Lock()
	s.calls = append(s.calls, slices.Clone(keys))
	s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(keys); err != nil {
			return nil, err
		}
	}
	vs := map[string]product{}
	for _, k := range keys {
		if !s.missing[k] {
			vs[k] = product{ID: k, Price: 1}
		}
	}
	return vs, nil
}

func (s *source) loaded() (calls, keys int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		keys += len(c)
	}
	return len(s.calls), keys
}

func keysOf(t *testing.T, n int) []string {
	base := key(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", base, i)
	}
	return keys
}

func TestGetManyLoadsTheMissesInOneCall(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{})
	keys := keysOf(t, 150)
	for _, k := range keys[:50] {
		if _, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: k, Price: 1}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	src := &source{missing: map[string]bool{keys[140]: true, keys[149]: true}}
	asked := append(slices.Clone(keys), keys[0], keys[60]) // repeats are read once
	got, err := c.GetMany(t.Context(), asked, src.load)
	if err != nil {
		t.Fatal(err)
	}
	if calls, n := src.loaded(); calls != 1 || n != 100 {
		t.Fatalf("the loader was called %d times for %d keys; want once for the 100 misses", calls, n)
	}
	if len(got) != 148 || got[keys[0]].ID != keys[0] || got[keys[99]].ID != keys[99] {
		t.Fatalf("got %d values (%+v); want the 148 that exist", len(got), got[keys[99]])
	}
	if _, ok := got[keys[140]]; ok {
		t.Fatal("a key the loader left out is in the answer")
	}
	// All cached now, "not found" too.
	again, err := c.GetMany(t.Context(), keys, src.load)
	if calls, _ := src.loaded(); err != nil || calls != 1 || len(again) != 148 {
		t.Fatalf("read again: %d values, %v, the loader called %d times in all; want 148 from the cache", len(again), err, calls)
	}
	if got, err := c.GetMany(t.Context(), nil, src.load); err != nil || len(got) != 0 {
		t.Fatalf("no keys: %v, %v", got, err)
	}
	if _, err := c.Get(t.Context(), keys[149], func(context.Context) (product, error) { t.Fatal("loaded"); return product{}, nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a key GetMany found missing = %v; want ErrNotFound, cached", err)
	}
}

func TestGetManyLoadsMaxBatchKeysACall(t *testing.T) {
	c := New[product](testenv.Cache(t), Options[product]{MaxBatch: 30})
	src := &source{}
	got, err := c.GetMany(t.Context(), keysOf(t, 100), src.load)
	if err != nil || len(got) != 100 {
		t.Fatalf("got %d, %v", len(got), err)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	for _, call := range src.calls {
		if len(call) > 30 {
			t.Fatalf("a call of the loader for %d keys; MaxBatch is 30", len(call))
		}
	}
	if len(src.calls) != 4 {
		t.Fatalf("%d calls for 100 keys; want 4", len(src.calls))
	}
}

func TestGetManyFailsOnlyTheKeysThatFailed(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{MaxBatch: 10})
	keys := keysOf(t, 40)
	bad := errors.New("the database failed")
	src := &source{fail: func(ks []string) error {
		if slices.Contains(ks, keys[25]) {
			return bad
		}
		return nil
	}}
	got, err := c.GetMany(t.Context(), keys, src.load)
	var many *ManyError
	if !errors.As(err, &many) || !errors.Is(err, bad) {
		t.Fatalf("err = %v; want a *ManyError wrapping the loader's", err)
	}
	if len(many.Failed) != 10 || many.Failed[keys[25]] == nil || len(got) != 30 {
		t.Fatalf("%d failed, %d answered; want the 10 of the failed call failed, the 30 others answered", len(many.Failed), len(got))
	}
	if !strings.Contains(err.Error(), "10 of the keys failed") {
		t.Fatalf("err = %q", err)
	}
	// The failed keys' leases were given back: the next read loads them.
	src.fail = nil
	if got, err := c.GetMany(t.Context(), keys, src.load); err != nil || len(got) != 40 {
		t.Fatalf("read again: %d, %v", len(got), err)
	}
	if _, n := src.loaded(); n != 50 {
		t.Fatalf("%d keys loaded in all; want 40, then the 10 that failed", n)
	}
}

func TestGetManyWaitsForAnotherLoader(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{})
	keys := keysOf(t, 3)
	started := make(chan struct{})
	go c.Get(context.Background(), keys[1], func(context.Context) (product, error) {
		close(started)
		time.Sleep(200 * time.Millisecond)
		return product{ID: "the other loader's"}, nil
	})
	<-started
	src := &source{}
	got, err := c.GetMany(t.Context(), keys, src.load)
	if err != nil || got[keys[1]].ID != "the other loader's" || len(got) != 3 {
		t.Fatalf("got %+v, %v; want the other loader's value for %s", got, err, keys[1])
	}
	if _, n := src.loaded(); n != 2 {
		t.Fatalf("%d keys loaded; want the 2 nobody else loads", n)
	}
}

func TestGetManyKeepsAndServesTheLocalTier(t *testing.T) {
	near := newFakeLocal()
	c := New[product](testenv.Cache(t), Options[product]{Local: near})
	keys := keysOf(t, 5)
	src := &source{}
	for range 3 { // loaded, then read from the cache and kept, then from memory
		if got, err := c.GetMany(t.Context(), keys, src.load); err != nil || len(got) != 5 {
			t.Fatalf("got %d, %v", len(got), err)
		}
	}
	if calls, _ := src.loaded(); calls != 1 || len(near.held) != 5 {
		t.Fatalf("the loader called %d times, the tier holds %d; want once, and all 5 kept", calls, len(near.held))
	}
}

// downClient is a cache that never answers.
func downClient(t *testing.T) *lossyClient {
	return &lossyClient{Client: testenv.Cache(t), lose: func([]string) (bool, bool) { return true, false }}
}

func TestWhileTheCacheIsDownStaleIfErrorServesWhatTheTierKept(t *testing.T) {
	near := newFakeLocal()
	near.stale = map[string]product{"kept": {ID: "kept"}}
	c := New[product](downClient(t), Options[product]{Local: near, BreakerThreshold: -1})
	src := &source{}
	got, err := c.GetMany(t.Context(), []string{"kept", "other"}, src.load)
	if err != nil || got["kept"].ID != "kept" || got["other"].ID != "other" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, n := src.loaded(); n != 1 {
		t.Fatalf("%d keys loaded; want only the one the tier did not keep", n)
	}
	if v, err := c.Get(t.Context(), "kept", func(context.Context) (product, error) { t.Fatal("loaded"); return product{}, nil }); err != nil || v.ID != "kept" {
		t.Fatalf("Get = %+v, %v", v, err)
	}
	// The cache answering ends it, even for a key that is not asked.
	up := New[product](testenv.Cache(t), Options[product]{Local: near})
	if _, err := up.Get(t.Context(), key(t), func(context.Context) (product, error) { return product{}, nil }); err != nil {
		t.Fatal(err)
	}
	if near.stale != nil {
		t.Fatal("the tier was not told that the cache answered")
	}
}

// TestLoadsWhileTheCacheIsDownAreBounded: the direct loads of a key are
// one at a time, those who came meanwhile sharing the next, and no more
// than MaxConcurrentLoads run at once.
func TestLoadsWhileTheCacheIsDownAreBounded(t *testing.T) {
	c := New[product](downClient(t), Options[product]{MaxConcurrentLoads: 2})
	var loads, running, most atomic.Int32
	release := make(chan struct{})
	slow := func(context.Context) (product, error) {
		loads.Add(1)
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
		return product{ID: "source"}, nil
	}
	var wg sync.WaitGroup
	for i := range 12 { // 4 keys, 3 readers each
		wg.Go(func() {
			if v, err := c.Get(t.Context(), fmt.Sprint("key", i%4), slow); err != nil || v.ID != "source" {
				t.Errorf("Get = %+v, %v", v, err)
			}
		})
	}
	for loads.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Get(ctx, "another", slow); !errors.Is(err, ErrOverloaded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read beyond the bound = %v; want ErrOverloaded at its deadline", err)
	}
	close(release)
	wg.Wait()
	if most.Load() != 2 || loads.Load() > 8 {
		t.Fatalf("%d loads, at most %d at once; want two a key at most, 2 at once", loads.Load(), most.Load())
	}
}

var _ valkey.Client = (*lossyClient)(nil)

type panickingCodec struct{ JSONCodec[product] }

func (panickingCodec) Marshal(product) ([]byte, error) { panic("marshal") }

func TestGetManyTurnsAPanicIntoErrors(t *testing.T) {
	c := New[product](testenv.Cache(t), Options[product]{Codec: panickingCodec{}})
	keys := keysOf(t, 2)
	var many *ManyError
	if _, err := c.GetMany(t.Context(), keys, (&source{}).load); !errors.As(err, &many) || len(many.Failed) != 2 {
		t.Fatalf("err = %v; want both keys failed", err)
	}
}

func TestGetManyCancelledGivesItsLeasesBack(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{})
	keys := keysOf(t, 3)
	ctx, cancel := context.WithCancel(t.Context())
	if _, err := c.GetMany(ctx, keys, func(ctx context.Context, _ []string) (map[string]product, error) {
		cancel()
		return nil, ctx.Err()
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if !givenBack(t, client, keys...) { // as the load ends, which GetMany no longer waits for
		t.Fatal("a key still holds a lease")
	}
}

// TestAGetManyOfManyKeysIsNoOutage: its reads go a pipeline at a time, each
// within CacheTimeout; a call that answered ends StaleIfError's serving.
func TestAGetManyOfManyKeysIsNoOutage(t *testing.T) {
	near := newFakeLocal()
	c := New[product](testenv.Cache(t), Options[product]{Local: near, BreakerThreshold: 1})
	keys := keysOf(t, 20_000)
	near.stale = map[string]product{keys[0]: {ID: "stale"}}
	got, err := c.GetMany(t.Context(), keys, (&source{}).load)
	if err != nil || c.breaker.isOpen.Load() || got[keys[0]].ID == "stale" || len(got) != len(keys) {
		t.Fatalf("%d values, %v, breaker open %v, %s served %q", len(got), err, c.breaker.isOpen.Load(), keys[0], got[keys[0]].ID)
	}
	partly := &lossyClient{Client: testenv.Cache(t), lose: func(a []string) (bool, bool) { return len(a) > 1 && a[1] == "down:k", false }}
	near.stale = map[string]product{"down:k": {ID: "stale"}}
	c = New[product](partly, Options[product]{Local: near, BreakerThreshold: -1})
	if got, _ := c.GetMany(t.Context(), []string{"down:k", key(t)}, (&source{}).load); got["down:k"].ID == "stale" {
		t.Fatal("served stale in a call the cache answered")
	}
}
