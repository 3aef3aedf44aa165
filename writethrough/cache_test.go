package writethrough

import (
	"context"
	"crypto/rand"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

type product struct {
	ID      string `json:"id"`
	Price   int64  `json:"price"`
	Version int64  `json:"version"`
}

func versionOf(p product) int64 { return p.Version }

func key(t *testing.T) string { return "wt:test:" + rand.Text() }

// patient is a CacheTimeout for tests whose fills must be stored: past the
// default 150 ms a Get loads without filling, which a busy CI machine's
// -race run reaches now and then.
const patient = 10 * time.Second

func TestGetLoadsOnceThenHits(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{CacheTimeout: patient})
	k := key(t)
	var loads atomic.Int32
	load := func(context.Context) (product, error) { loads.Add(1); return product{ID: "p1", Price: 10}, nil }
	for range 3 {
		v, err := c.Get(t.Context(), k, load)
		if err != nil || v.Price != 10 {
			t.Fatalf("Get = %+v, %v", v, err)
		}
	}
	if loads.Load() != 1 {
		t.Fatalf("loaded %d times, want 1", loads.Load())
	}
	ttl, _ := client.Do(t.Context(), client.B().Pttl().Key(k).Build()).AsInt64()
	if ttl < int64(9*time.Minute/time.Millisecond) || ttl > int64(11*time.Minute/time.Millisecond) {
		t.Fatalf("TTL %d ms, want 10 min ± 10%%", ttl)
	}
}

func TestNotFoundIsCachedBriefly(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{NegativeTTL: 5 * time.Second, CacheTimeout: patient})
	k := key(t)
	var loads atomic.Int32
	load := func(context.Context) (product, error) { loads.Add(1); return product{}, ErrNotFound }
	for range 2 {
		if _, err := c.Get(t.Context(), k, load); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	}
	ttl, _ := client.Do(t.Context(), client.B().Pttl().Key(k).Build()).AsInt64()
	if loads.Load() != 1 || ttl <= 0 || ttl > 5000 {
		t.Fatalf("loads %d, TTL %d ms: want one load and a 5 s negative entry", loads.Load(), ttl)
	}
}

func TestUndecodableValueIsReloaded(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{})
	k := key(t)
	for _, garbage := range []string{"not an envelope", entry{kind: kindValue, stamp: "s", expiry: time.Now().Add(time.Hour), payload: []byte("{broken")}.encode()} {
		if err := client.Do(t.Context(), client.B().Set().Key(k).Value(garbage).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "fresh"}, nil })
		if err != nil || v.ID != "fresh" {
			t.Fatalf("Get over %q = %+v, %v", garbage, v, err)
		}
	}
}

func TestFailedLoadReleasesTheLease(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{})
	k := key(t)
	boom := errors.New("database down")
	if _, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if n, _ := client.Do(t.Context(), client.B().Exists().Key(k).Build()).AsInt64(); n != 0 {
		t.Fatal("the lease of a failed load is still there: others would wait for nothing")
	}
}

func TestWriteThroughUpdatesKnownVersionsOnly(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{VersionOf: versionOf})
	k := key(t)
	write := func(price, version int64) bool {
		stored, err := c.WriteThrough(t.Context(), k, func(context.Context) (product, int64, error) {
			return product{ID: "p", Price: price, Version: version}, version, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}
	exists := func() bool {
		n, _ := client.Do(t.Context(), client.B().Exists().Key(k).Build()).AsInt64()
		return n == 1
	}
	// Nothing cached: a write-through cannot know it is the newest, so it
	// leaves the key to the next read.
	if write(10, 1) || exists() {
		t.Fatal("a write-through filled an empty key")
	}
	if v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{Price: 10, Version: 1}, nil }); err != nil || v.Price != 10 {
		t.Fatalf("Get = %+v, %v", v, err)
	}
	if !write(12, 3) || write(11, 2) || write(13, 3) {
		t.Fatal("want: v3 stored over the read v1, then v2 and another v3 refused")
	}
	v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { t.Fatal("loaded on a hit"); return product{}, nil })
	if err != nil || v.Price != 12 {
		t.Fatalf("Get = %+v, %v; want the v3 price 12", v, err)
	}
	if _, err := c.WriteThrough(t.Context(), k, func(context.Context) (product, int64, error) { return product{}, 0, nil }); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 0: %v, want ErrVersion", err)
	}

	// Without VersionOf a read value's version is unknown: invalidated, not overwritten.
	unversioned := New[product](client, Options[product]{})
	k2 := key(t)
	_, _ = unversioned.Get(t.Context(), k2, func(context.Context) (product, error) { return product{Price: 1}, nil })
	stored, err := unversioned.WriteThrough(t.Context(), k2, func(context.Context) (product, int64, error) { return product{Price: 2}, 5, nil })
	if n, _ := client.Do(t.Context(), client.B().Exists().Key(k2).Build()).AsInt64(); err != nil || stored || n != 0 {
		t.Fatalf("over a value of unknown version: stored %v, exists %d, %v; want it invalidated", stored, n, err)
	}

	if err := c.Write(t.Context(), k, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("Write did not invalidate")
	}
}

func TestEarlyRefreshAndRenewal(t *testing.T) {
	client := testenv.Cache(t)
	clock := &fakeClock{now: time.Now()}
	k := key(t)
	var loads atomic.Int32
	load := func(context.Context) (product, error) {
		clock.now = clock.now.Add(100 * time.Millisecond) // Δ: a 100 ms recompute
		return product{Price: int64(loads.Add(1))}, nil
	}
	// ln(rand) = -1: refresh once Δ·β = 100 ms from the logical expiry.
	c := New[product](client, Options[product]{TTL: time.Minute, Jitter: -1, Clock: clock, Rand: func() float64 { return math.Exp(-1) }})
	if v, _ := c.Get(t.Context(), k, load); v.Price != 1 {
		t.Fatalf("first load = %d", v.Price)
	}
	clock.now = clock.now.Add(time.Minute - 150*time.Millisecond)
	if v, _ := c.Get(t.Context(), k, load); v.Price != 1 {
		t.Fatalf("150 ms before expiry: %d, want the cached 1", v.Price)
	}
	clock.now = clock.now.Add(60 * time.Millisecond)
	if v, _ := c.Get(t.Context(), k, load); v.Price != 2 {
		t.Fatalf("90 ms before expiry: %d, want an early refresh to 2", v.Price)
	}

	renewing := New[product](client, Options[product]{TTL: time.Minute, Jitter: -1, Beta: -1, Renew: 0.5, Clock: clock})
	clock.now = clock.now.Add(40 * time.Second) // 20 s of 60 left: under half
	if v, _ := renewing.Get(t.Context(), k, load); v.Price != 2 {
		t.Fatalf("renewal served %d, want the cached 2", v.Price)
	}
	raw, _ := client.Do(t.Context(), client.B().Get().Key(k).Build()).AsBytes()
	if e, _ := decodeEntry(raw); e.expiry.Sub(clock.now) < 59*time.Second {
		t.Fatalf("after renewal %v left, want a full minute", e.expiry.Sub(clock.now))
	}
}

// TestStampede sends 200 concurrent readers, spread over 10 clients as over
// 10 processes, at one missing hot key.
func TestStampede(t *testing.T) {
	ours, naive := stampede(t, true), stampede(t, false)
	t.Logf("loader calls for 200 concurrent readers: writethrough %d, naive cache-aside %d", ours, naive)
	if ours > 2 {
		t.Fatalf("the loader ran %d times, want at most 2", ours)
	}
}

func stampede(t *testing.T, ours bool) int32 {
	k := key(t)
	var loads atomic.Int32
	load := func(context.Context) (product, error) {
		loads.Add(1)
		time.Sleep(50 * time.Millisecond)
		return product{ID: "hot"}, nil
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		client := testenv.Cache(t)
		// The lease is under test, not CacheTimeout: a fresh client's first
		// call dials TLS, which a loaded machine may take past 150 ms, and
		// a call past it loads without the lease.
		c := New[product](client, Options[product]{CacheTimeout: patient})
		for range 20 {
			wg.Go(func() {
				<-start
				var err error
				if ours {
					_, err = c.Get(t.Context(), k, load)
				} else {
					_, err = naiveGet(t.Context(), client, k, time.Minute, load)
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return loads.Load()
}

// naiveGet is the usual cache-aside recipe: GET; on a miss, load and SET
// with a TTL. Nothing stops a load that started before a write from
// storing the old value after the write's invalidation.
func naiveGet(ctx context.Context, client valkey.Client, key string, ttl time.Duration, load func(context.Context) (product, error)) (product, error) {
	if raw, err := client.Do(ctx, client.B().Get().Key(key).Build()).AsBytes(); err == nil {
		return JSONCodec[product]{}.Unmarshal(raw)
	}
	v, err := load(ctx)
	if err != nil {
		return v, err
	}
	raw, _ := JSONCodec[product]{}.Marshal(v)
	return v, client.Do(ctx, client.B().Set().Key(key).Value(string(raw)).Px(ttl).Build()).Error()
}
