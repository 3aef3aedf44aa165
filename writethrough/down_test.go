package writethrough

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// These tests stop the nodes of a cluster of their own, with a service's
// request deadline of 3 s: a Get that waited for the cache that long would
// fail with it.
const requestDeadline = 3 * time.Second

// countingClient counts the commands sent to the cache, scripts included,
// and the most sent in one pipeline.
type countingClient struct {
	valkey.Client
	calls, largest atomic.Int64
}

func (c *countingClient) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	c.calls.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	n := int64(len(multi))
	c.calls.Add(n)
	for m := c.largest.Load(); n > m && !c.largest.CompareAndSwap(m, n); m = c.largest.Load() {
	}
	return c.Client.DoMulti(ctx, multi...)
}

// downCache is a Cache on a private cluster, its breaker on a fake clock,
// with keys cached as "cached", and a loader that reads "source".
type downCache struct {
	t       *testing.T
	cluster *testenv.Cluster
	client  *countingClient
	clock   *lockedClock
	c       *Cache[product]
	keys    []string
	loads   atomic.Int32
}

func newDownCache(t *testing.T, tune func(*valkey.ClientOption), opts Options[product]) *downCache {
	cluster := testenv.StartCluster(t, "reads-test", 7511)
	opt, err := cluster.Config.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(&opt)
	}
	client, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	d := &downCache{t: t, cluster: cluster, client: &countingClient{Client: client}, clock: &lockedClock{now: time.Now()}}
	opts.Clock = d.clock
	d.c = New[product](d.client, opts)
	for i := range 12 { // on every node
		k := "wt:down:" + strconv.Itoa(i)
		if _, err := d.c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "cached"}, nil }); err != nil {
			t.Fatal(err)
		}
		d.keys = append(d.keys, k)
	}
	return d
}

// get reads key within the request deadline, and says how long it took.
func (d *downCache) get(key string) (product, error, time.Duration) {
	ctx, cancel := context.WithTimeout(d.t.Context(), requestDeadline)
	defer cancel()
	start := time.Now()
	v, err := d.c.Get(ctx, key, func(context.Context) (product, error) { d.loads.Add(1); return product{ID: "source"}, nil })
	return v, err, time.Since(start)
}

// readsFromSource checks that every key is read from the source, and
// returns the longest read.
func (d *downCache) readsFromSource(phase string) (longest time.Duration) {
	d.t.Helper()
	for _, k := range d.keys {
		v, err, took := d.get(k)
		if err != nil || v.ID != "source" {
			d.t.Fatalf("%s: Get %s = %+v, %v after %v; want the loader's value", phase, k, v, err, took)
		}
		longest = max(longest, took)
	}
	return longest
}

// getMargin is what a Get may take beyond one CacheTimeout while the cache
// is down (documented: Get loads after at most CacheTimeout, 150 ms): room
// for a loaded machine, yet far below what the bound guards against —
// valkey-go's wait for a dial (5 s) or for the request deadline (3 s).
const getMargin = time.Second

// within fails the test when the longest Get of a phase took more than
// CacheTimeout and getMargin.
func (d *downCache) within(phase string, longest time.Duration) {
	d.t.Helper()
	if bound := d.c.opts.CacheTimeout + getMargin; longest > bound {
		d.t.Errorf("%s: a Get took %v, want at most %v (CacheTimeout %v and %v of margin)", phase, longest, bound, d.c.opts.CacheTimeout, getMargin)
	}
}

func (d *downCache) freeze() {
	for _, p := range d.cluster.Ports {
		d.cluster.Freeze(d.t, p)
	}
}

func (d *downCache) thaw() {
	for _, p := range d.cluster.Ports {
		d.cluster.Thaw(d.t, p)
	}
}

// breakerOpen checks that, the breaker open, Gets load without a word to
// the cache.
func (d *downCache) breakerOpen(phase string) {
	d.t.Helper()
	calls, loads := d.client.calls.Load(), d.loads.Load()
	longest := d.readsFromSource(phase + ", breaker open")
	if n := d.client.calls.Load() - calls; n != 0 {
		d.t.Fatalf("%s: %d cache calls while the breaker is open, want none", phase, n)
	}
	if n := d.loads.Load() - loads; n != int32(len(d.keys)) {
		d.t.Fatalf("%s: %d loads for %d Gets", phase, n, len(d.keys))
	}
	d.t.Logf("%s, breaker open: longest Get %v", phase, longest)
	d.within(phase+", breaker open", longest)
}

// probeUntilHit moves the clock past cool-downs until a probe finds the
// cache answering, and checks that Gets are then served from it: want is
// what it holds (the value read before, or after a restart the source's
// again). The probed key may hold the source's value instead: a probe whose
// read was slower than CacheTimeout on a loaded machine loads it, and its
// fill, which closes the breaker, writes it.
func (d *downCache) probeUntilHit(phase, want string) {
	d.t.Helper()
	probed := want
	for range 50 {
		d.clock.add(time.Second)
		v, err, _ := d.get(d.keys[0])
		if err != nil {
			d.t.Fatal(err)
		}
		if !d.c.breaker.isOpen.Load() {
			probed = v.ID
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d.c.breaker.isOpen.Load() {
		d.t.Fatalf("%s: no probe closed the breaker", phase)
	}
	for _, k := range d.keys[1:] {
		_, _, _ = d.get(k) // after a restart, the first read of a key fills it
	}
	loads := d.loads.Load()
	for i, k := range d.keys {
		if v, err, _ := d.get(k); err != nil || v.ID != want && (i > 0 || v.ID != probed) {
			d.t.Fatalf("%s: Get %s = %+v, %v; want %q from the cache", phase, k, v, err, want)
		}
	}
	if n := d.loads.Load() - loads; n != 0 {
		d.t.Fatalf("%s: %d loads once the breaker closed, want hits", phase, n)
	}
}

func TestGetWhileTheCacheIsFrozen(t *testing.T) {
	d := newDownCache(t, nil, Options[product]{})
	d.freeze()
	longest := d.readsFromSource("frozen")
	t.Logf("frozen, breaker closed: longest Get %v (CacheTimeout %v)", longest, d.c.opts.CacheTimeout)
	d.within("frozen, breaker closed", longest)
	d.breakerOpen("frozen")
	d.thaw()
	d.breakerOpen("thawed, before the cool-down")
	d.probeUntilHit("thawed", "cached")
}

func TestGetWhileTheNodesAreKilled(t *testing.T) {
	d := newDownCache(t, nil, Options[product]{})
	for _, p := range d.cluster.Ports {
		d.cluster.StopNode(t, p)
	}
	t.Logf("killed, breaker closed: longest Get %v", d.readsFromSource("killed"))
	d.breakerOpen("killed")
	d.cluster.Restart(t)
	d.probeUntilHit("restarted empty", "source")
}

// TestGetWhileValkeyRedials freezes the cache past valkey-go's keep-alive
// deadline, which closes the connections and has its topology refresh
// dial the frozen nodes. A call to such a node waits for that dial, up to
// the dialer's timeout (5 s), whatever its own deadline; with the breaker
// off every Get goes to the cache, and none may wait longer than
// CacheTimeout, give or take a loaded machine (within).
func TestGetWhileValkeyRedials(t *testing.T) {
	d := newDownCache(t, func(opt *valkey.ClientOption) { opt.ConnWriteTimeout = time.Second }, Options[product]{BreakerThreshold: -1})
	d.freeze()
	var longest time.Duration
	for start := time.Now(); time.Since(start) < 8*time.Second; {
		longest = max(longest, d.readsFromSource("frozen"))
	}
	t.Logf("frozen 8 s, breaker off: longest Get %v", longest)
	d.within("frozen 8 s, breaker off", longest)
}

func TestWritesWhileTheCacheIsDown(t *testing.T) {
	d := newDownCache(t, nil, Options[product]{VersionOf: versionOf})
	d.freeze()
	for i := range 2 * d.c.opts.BreakerThreshold { // before and after the breaker opens
		k := d.keys[i%len(d.keys)]
		wrote := false
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), requestDeadline)
		var err error
		if i%2 == 0 {
			err = d.c.Write(ctx, k, func(context.Context) error { wrote = true; return nil })
		} else {
			var stored bool
			stored, err = d.c.WriteThrough(ctx, k, func(context.Context) (product, int64, error) {
				wrote = true
				return product{ID: "new", Version: 2}, 2, nil
			})
			if stored {
				t.Error("WriteThrough stored into a frozen cache")
			}
		}
		cancel()
		if !wrote || !errors.Is(err, ErrInvalidate) || !errors.Is(err, ErrCacheUnavailable) {
			t.Fatalf("write %d: wrote %v, err %v; want the database written, then ErrInvalidate and ErrCacheUnavailable", i, wrote, err)
		}
		t.Logf("write %d: %v after %v", i, err, time.Since(start).Round(time.Millisecond))
	}
	if !d.c.breaker.isOpen.Load() {
		t.Fatal("failed invalidations did not open the breaker")
	}
}

// lossyClient fails the commands that lose says to lose: sent, their reply
// lost past the deadline, or never sent at all.
type lossyClient struct {
	valkey.Client
	lose func(args []string) (lost, sent bool)
}

func (c *lossyClient) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	lost, sent := c.lose(cmd.Commands())
	if !lost {
		return c.Client.Do(ctx, cmd)
	}
	if sent {
		var reply *valkey.ValkeyError
		if resp := c.Client.Do(ctx, cmd); errors.As(resp.Error(), &reply) && reply.IsNoScript() {
			return resp // for the EVAL that follows, to be lost in turn
		}
	}
	return valkey.NewErrorResult(context.DeadlineExceeded)
}

// DoMulti loses each command as Do does.
func (c *lossyClient) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	resps := make([]valkey.ValkeyResult, len(multi))
	for i, cmd := range multi {
		resps[i] = c.Do(ctx, cmd)
	}
	return resps
}

// TestLostRepliesLeaveNoLease loses the lease's SET or the fill: the Get
// still answers from the loader, and no lease is left for other readers to
// wait on; a fill that landed stays.
func TestLostRepliesLeaveNoLease(t *testing.T) {
	client := testenv.Cache(t)
	isFill := func(args []string) bool {
		return (args[0] == "EVALSHA" || args[0] == "EVAL") && len(args) == 7 && strings.HasPrefix(args[5], magic+"v|")
	}
	for _, tc := range []struct {
		name       string
		lose       func(args []string) bool
		sent, kept bool
	}{
		{"lease SET, reply lost", func(args []string) bool { return args[0] == "SET" }, true, false},
		{"lease SET, never sent", func(args []string) bool { return args[0] == "SET" }, false, false},
		{"fill, reply lost", isFill, true, true},
		{"fill, never sent", isFill, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lossy := &lossyClient{Client: client, lose: func(args []string) (bool, bool) { return tc.lose(args), tc.sent }}
			c := New[product](lossy, Options[product]{})
			k := key(t)
			v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "source"}, nil })
			if err != nil || v.ID != "source" {
				t.Fatalf("Get = %+v, %v", v, err)
			}
			raw, err := client.Do(t.Context(), client.B().Get().Key(k).Build()).AsBytes()
			if valkey.IsValkeyNil(err) {
				if tc.kept {
					t.Fatal("the fill that landed was deleted")
				}
				return
			}
			e, derr := decodeEntry(raw)
			if err != nil || derr != nil || e.kind != kindValue || !tc.kept {
				t.Fatalf("the key holds %q (%v): want it empty, or the value when the fill landed", raw, err)
			}
		})
	}
}

// TestAWaiterLoadsBeforeItsDeadline: a caller finding another's lease
// waits half its time left at most, then loads: a loader slower than the
// request's deadline does not fail the requests waiting on it.
func TestAWaiterLoadsBeforeItsDeadline(t *testing.T) {
	c := New[product](testenv.Cache(t), Options[product]{})
	k := key(t)
	slow := make(chan struct{})
	defer close(slow)
	go func() {
		_, _ = c.Get(context.Background(), k, func(context.Context) (product, error) { <-slow; return product{ID: "slow"}, nil })
	}()
	time.Sleep(200 * time.Millisecond) // its lease taken
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	v, err := c.Get(ctx, k, func(context.Context) (product, error) { return product{ID: "own"}, nil })
	if err != nil || v.ID != "own" {
		t.Fatalf("Get = %+v, %v: want its own load within its deadline", v, err)
	}
}
