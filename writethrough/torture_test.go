package writethrough

import (
	"context"
	"crypto/rand"
	"log/slog"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/valkey-io/valkey-go"
)

// persist takes the TTL off random keys, whatever they hold — a loader's
// lease, a value, nothing —, and sets stale leases on missing ones, until
// ctx ends.
func persist(ctx context.Context, t *testing.T, client valkey.Client, keyOf func(int) string) {
	for ctx.Err() == nil {
		k := keyOf(mrand.IntN(tortureKeys))
		cmd := client.B().Persist().Key(k).Build()
		if mrand.IntN(2) == 0 {
			cmd = client.B().Set().Key(k).Value(entry{kind: kindLease, stamp: stamp()}.encode()).Nx().Build()
		}
		if err := client.Do(context.Background(), cmd).Error(); err != nil && !valkey.IsValkeyNil(err) {
			t.Error(err)
			return
		}
		time.Sleep(time.Duration(mrand.IntN(2000)) * time.Microsecond)
	}
}

// TestStaleSetTorture runs readers doing cache-aside against writers that
// update the source of truth and invalidate after random delays, as the
// event-driven invalidator does; with WriteThrough the writers also store
// the new value, after a random delay of their own. Once every write and
// invalidation is delivered, no key may hold a value other than the
// source's — also when one in ten of the readers' commands fails, sent or
// not, as when the cache stops answering, and when something else PERSISTs
// the keys, leases included, and sets stale leases, which readers drop.
func TestStaleSetTorture(t *testing.T) {
	naive, ours, through, lossy, hostile := torture(t, naiveAside, false), torture(t, invalidateOnWrite, false), torture(t, writeThrough, false), torture(t, lostReplies, false), torture(t, staleLeases, false)
	t.Logf("stale keys after quiescence: Get + invalidation %d, Get + WriteThrough + invalidation %d, the same with replies lost %d, with stale leases %d, naive cache-aside %d (of %d)",
		ours, through, lossy, hostile, naive, tortureKeys)
	if ours != 0 || through != 0 || lossy != 0 || hostile != 0 {
		t.Fatalf("stale keys: %d with invalidation, %d with write-through, %d with replies lost, %d with stale leases; want 0", ours, through, lossy, hostile)
	}
}

// TestGetManyTorture is TestStaleSetTorture's, the readers reading a few
// keys at a time with GetMany.
func TestGetManyTorture(t *testing.T) {
	ours, through, lossy, hostile := torture(t, invalidateOnWrite, true), torture(t, writeThrough, true), torture(t, lostReplies, true), torture(t, staleLeases, true)
	t.Logf("stale keys after quiescence, GetMany: invalidation %d, WriteThrough %d, replies lost %d, stale leases %d (of %d)", ours, through, lossy, hostile, tortureKeys)
	if ours != 0 || through != 0 || lossy != 0 || hostile != 0 {
		t.Fatalf("stale keys: %d with invalidation, %d with write-through, %d with replies lost, %d with stale leases; want 0", ours, through, lossy, hostile)
	}
}

const tortureKeys = 16

type tortureMode int

const (
	naiveAside tortureMode = iota
	invalidateOnWrite
	writeThrough
	lostReplies // invalidateOnWrite, one reader command in ten failing
	staleLeases // invalidateOnWrite, keys PERSISTed and stale leases set meanwhile
)

func torture(t *testing.T, mode tortureMode, getMany bool) (stale int) {
	client := testenv.Cache(t)
	// The torture is of the order of fills and invalidations, not of time:
	// a machine busy with other work must not time its calls out (CI's
	// third run, its cores shared, did).
	opts := Options[product]{VersionOf: versionOf, Logger: slog.New(slog.DiscardHandler), CacheTimeout: 3 * time.Second}
	c := New[product](client, opts)
	if mode == lostReplies {
		lossy := &lossyClient{Client: client, lose: func([]string) (lost, sent bool) { return mrand.IntN(10) == 0, mrand.IntN(2) == 0 }}
		c = New[product](lossy, opts)
	}
	ns := rand.Text()
	keyOf := func(i int) string { return "wt:torture:" + ns + ":" + strconv.Itoa(i) }

	var mu sync.Mutex
	source := make([]product, tortureKeys) // the database
	load := func(i int) func(context.Context) (product, error) {
		return func(context.Context) (product, error) {
			mu.Lock()
			p := source[i]
			mu.Unlock()
			time.Sleep(time.Duration(mrand.IntN(5000)) * time.Microsecond) // the load's way back
			return p, nil
		}
	}
	loadMany := func(_ context.Context, keys []string) (map[string]product, error) {
		vs := map[string]product{}
		mu.Lock()
		for _, k := range keys {
			i, _ := strconv.Atoi(k[strings.LastIndexByte(k, ':')+1:])
			vs[k] = source[i]
		}
		mu.Unlock()
		time.Sleep(time.Duration(mrand.IntN(5000)) * time.Microsecond)
		return vs, nil
	}
	later := func(wg *sync.WaitGroup, max time.Duration, f func()) {
		wg.Go(func() { time.Sleep(time.Duration(mrand.Int64N(int64(max)))); f() })
	}

	ctx, stop := context.WithTimeout(t.Context(), 2*time.Second)
	defer stop()
	var readers, writers, delivered sync.WaitGroup
	for range 16 {
		readers.Go(func() {
			for ctx.Err() == nil {
				i := mrand.IntN(tortureKeys)
				var err error
				switch {
				case mode == naiveAside:
					_, err = naiveGet(context.Background(), client, keyOf(i), time.Hour, load(i))
				case getMany:
					keys := []string{keyOf(i), keyOf(mrand.IntN(tortureKeys)), keyOf(mrand.IntN(tortureKeys)), keyOf(i)}
					_, err = c.GetMany(context.Background(), keys, loadMany)
				default:
					_, err = c.Get(context.Background(), keyOf(i), load(i))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 4 {
		writers.Go(func() {
			for ctx.Err() == nil {
				i := mrand.IntN(tortureKeys)
				mu.Lock()
				source[i].Price++
				source[i].Version++
				written := source[i]
				mu.Unlock()
				if mode == writeThrough { // the service's own write-through, a little late
					later(&delivered, 3*time.Millisecond, func() {
						_, err := c.WriteThrough(context.Background(), keyOf(i), func(context.Context) (product, int64, error) {
							return written, written.Version, nil
						})
						if err != nil {
							t.Error(err)
						}
					})
				}
				later(&delivered, 2*time.Millisecond, func() { // the change event, delivered later
					if err := client.Do(context.Background(), client.B().Unlink().Key(keyOf(i)).Build()).Error(); err != nil {
						t.Error(err)
					}
				})
				time.Sleep(time.Duration(mrand.IntN(2000)) * time.Microsecond)
			}
		})
	}
	if mode == staleLeases {
		writers.Go(func() { persist(ctx, t, client, keyOf) })
	}
	writers.Wait()
	delivered.Wait()
	readers.Wait()
	if n := c.Stats().StaleLeases; mode == staleLeases {
		t.Logf("stale leases dropped: %d", n)
		if n == 0 {
			t.Error("no stale lease was dropped: the torture did not try what it is for")
		}
	}

	for i := range tortureKeys {
		raw, err := client.Do(context.Background(), client.B().Get().Key(keyOf(i)).Build()).AsBytes()
		if valkey.IsValkeyNil(err) {
			continue
		}
		var v product
		if mode == naiveAside {
			v, err = JSONCodec[product]{}.Unmarshal(raw)
		} else {
			e, derr := decodeEntry(raw)
			if derr != nil || e.kind == kindLease {
				continue
			}
			v, err = JSONCodec[product]{}.Unmarshal(e.payload)
		}
		if err != nil {
			t.Fatal(err)
		}
		if v.Price != source[i].Price {
			stale++
		}
	}
	return stale
}
