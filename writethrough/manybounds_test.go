package writethrough

import (
	"context"
	"crypto/rand"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestGetManyReturnsAtItsDeadline: a loader that ignores its context holds
// GetMany no longer than its caller's deadline, as it holds Get; the loads
// go on, and then fill their keys or give their leases back as Get's do,
// and nothing of the call outlives them. The loads not started yet never
// start: their leases go back at once.
func TestGetManyReturnsAtItsDeadline(t *testing.T) {
	client := testenv.Cache(t)
	c := New[product](client, Options[product]{MaxBatch: 1})
	src := &source{}
	keys := keysOf(t, loadsAtOnce+2)
	started := keys[:loadsAtOnce]
	bad := errors.New("the database failed")
	release := make(chan struct{})
	var loading sync.WaitGroup
	loading.Add(len(started))
	blocked := func(_ context.Context, ks []string) (map[string]product, error) {
		defer loading.Done()
		select {
		case <-release:
		case <-time.After(3 * time.Second):
		}
		if ks[0] == keys[0] {
			return nil, bad
		}
		return src.load(context.Background(), ks)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	got, err := c.GetMany(ctx, keys, blocked)
	took := time.Since(start)
	t.Logf("a GetMany of 200 ms, its loader blocked 3 s, returned after %v", took.Round(time.Millisecond))
	var many *ManyError
	if took > 250*time.Millisecond || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &many) || len(many.Failed) != len(keys) || len(got) != 0 {
		t.Fatalf("GetMany = %d values, %v after %v; want every key failed with the deadline within 250 ms", len(got), err, took)
	}
	for _, k := range started {
		if !exists(t, client, k) {
			t.Fatalf("%s holds no lease while its load runs", k)
		}
	}
	if !givenBack(t, client, keys[len(started):]...) {
		t.Fatal("the keys whose loads never started still hold their leases")
	}
	if !running() {
		t.Fatal("no goroutine of GetMany's runs its loads")
	}
	close(release)
	loading.Wait()
	for end := time.Now().Add(2 * time.Second); running(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("GetMany's goroutines run 2 s after its loads ended")
		}
	}
	if !givenBack(t, client, keys[0]) {
		t.Fatal("the failed load's key still holds its lease")
	}
	for _, k := range started[1:] {
		if v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { t.Fatal("loaded"); return product{}, nil }); err != nil || v.ID != k {
			t.Fatalf("Get %s = %+v, %v; want what the late load filled under its lease", k, v, err)
		}
	}
}

// TestGetManyPipelinesAreBounded: whatever MaxBatch, and however many keys
// or tags, no pipeline GetMany sends holds more than pipeline commands.
func TestGetManyPipelinesAreBounded(t *testing.T) {
	client := &countingClient{Client: testenv.Cache(t)}
	// Time enough for a pipeline on a loaded machine: what is measured is
	// its size.
	c := New[product](client, Options[product]{MaxBatch: 20_000, CacheTimeout: 2 * time.Second})
	keys := keysOf(t, 20_000)
	if got, err := c.GetMany(t.Context(), keys, (&source{}).load); err != nil || len(got) != len(keys) {
		t.Fatalf("got %d, %v", len(got), err)
	}
	t.Logf("the largest pipeline of a GetMany of 20,000 misses, MaxBatch 20,000: %d commands", client.largest.Load())
	if n := client.largest.Load(); n > pipeline {
		t.Fatalf("a pipeline of %d commands; want at most %d", n, pipeline)
	}
	// A value of 1,500 tags: their registrations, then their checks.
	client.largest.Store(0)
	tc := New[list](client, Options[list]{TagsOf: listTags, TagPrefix: "wt:tagtest:" + rand.Text() + ":", CacheTimeout: 2 * time.Second})
	k := key(t)
	ids := make([]string, 1500)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	loads := 0
	load := func(context.Context, []string) (map[string]list, error) {
		loads++
		return map[string]list{k: {Category: "big", IDs: ids}}, nil
	}
	for range 3 { // the tags made, the value registered and filled, a hit checked
		if got, err := tc.GetMany(t.Context(), []string{k}, load); err != nil || len(got[k].IDs) != len(ids) {
			t.Fatalf("got %d ids, %v", len(got[k].IDs), err)
		}
	}
	t.Logf("the largest pipeline of a value of 1,500 tags: %d commands", client.largest.Load())
	if n := client.largest.Load(); loads != 2 || n > pipeline {
		t.Fatalf("%d loads, a pipeline of %d commands; want 2 loads, then a hit, at most %d a pipeline", loads, n, pipeline)
	}
}

// running says whether a goroutine runs GetMany's code: valkey-go's own
// come and go with its connections.
func running() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "writethrough.(*many")
}

// givenBack says whether keys hold nothing within a second: the leases of
// loads that GetMany no longer waits for go back as they end.
func givenBack(t *testing.T, client valkey.Client, keys ...string) bool {
	t.Helper()
	for end := time.Now().Add(time.Second); slices.ContainsFunc(keys, func(k string) bool { return exists(t, client, k) }); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}
