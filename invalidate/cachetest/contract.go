package cachetest

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/invalidate"
)

// UnderTest is a cache and the means to put what it talks to in each
// state the contract needs.
type UnderTest struct {
	// Cache deletes keys as a user that may delete the keys under "cache:"
	// and not those under "session:", as the worker's (WORKER_KEYS).
	Cache invalidate.Cache
	// Set stores keys, as a service filling the cache would.
	Set func(t *testing.T, keys ...string)
	// Reshard stores key on another node than the one that served its
	// slot when Cache was made: with ask, while the slot migrates there
	// (the old owner answers ASK); without, once it has (MOVED). Nil where
	// the slots must stay put, on a cluster others' tests share.
	Reshard func(t *testing.T, key string, ask bool)
	// Down returns a cache whose connection to what serves key is refused
	// until the test ends: Cache with key's node stopped, or one that
	// cannot connect at all.
	Down func(t *testing.T, key string) invalidate.Cache
	// Tag stores keys and registers them in the tag at key, as fills of
	// writethrough would.
	Tag func(t *testing.T, key string, keys ...string)
}

// Contract runs the contract of an invalidate.Cache, each behaviour in a
// subtest of its own with a cache from newCache.
func Contract(t *testing.T, newCache func(t *testing.T) UnderTest) {
	for _, b := range []struct {
		name string
		test func(*testing.T, UnderTest)
	}{
		{"each key deleted, or absent once deleted, across slots", deletedOrAbsent},
		{"a key behind ASK is deleted", func(t *testing.T, c UnderTest) { redirected(t, c, true) }},
		{"a key behind MOVED is deleted", func(t *testing.T, c UnderTest) { redirected(t, c, false) }},
		{"a key refused to the user fails for good, alone", refusedKey},
		{"a refused connection fails for now", refusedConnection},
		{"a deadline fails every key with it", deadline},
		{"a tag's entries are deleted and forgotten; a tag refused to the user fails for good", taggedEntries},
	} {
		t.Run(b.name, func(t *testing.T) { b.test(t, newCache(t)) })
	}
}

// Tag returns a UnderTest.Tag registering keys through client, for a
// minute at most.
func Tag(client valkey.Client) func(t *testing.T, key string, keys ...string) {
	return func(t *testing.T, key string, keys ...string) {
		t.Helper()
		Set(client)(t, keys...)
		reg := tagset.Registration(1, time.Now().Add(time.Minute))
		for _, k := range keys {
			if err := client.Do(t.Context(), client.B().Hset().Key(key).FieldValue().FieldValue(k, reg).Build()).Error(); err != nil {
				t.Fatalf("HSET %s: %v", key, err)
			}
		}
		if err := client.Do(t.Context(), client.B().Expire().Key(key).Seconds(60).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// Set returns a UnderTest.Set storing keys through client, for a
// minute at most.
func Set(client valkey.Client) func(t *testing.T, keys ...string) {
	return func(t *testing.T, keys ...string) {
		t.Helper()
		cmds := make(valkey.Commands, len(keys))
		for i, k := range keys {
			cmds[i] = client.B().Set().Key(k).Value("cached").ExSeconds(60).Build()
		}
		for i, res := range client.DoMulti(t.Context(), cmds...) {
			if err := res.Error(); err != nil {
				t.Fatalf("SET %s: %v", keys[i], err)
			}
		}
	}
}

// newKeys returns n keys of the test's own under "cache:", in many slots.
func newKeys(n int) []string {
	prefix := "cache:contract:" + rand.Text()[:8] + ":"
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

func unlink(ctx context.Context, cache invalidate.Cache, keys []string) ([]invalidate.KeyStatus, []error) {
	status := make([]invalidate.KeyStatus, len(keys))
	errs := cache.Unlink(ctx, keys, status)
	if errs == nil {
		errs = make([]error, len(keys)) // so that every index reads
	}
	return status, errs
}

// expect fails t unless the keys came out as want, and without an error
// when not failed.
func expect(t *testing.T, keys []string, status []invalidate.KeyStatus, errs []error, want func(i int) invalidate.KeyStatus) {
	t.Helper()
	for i, st := range status {
		if st != want(i) || (st == invalidate.KeyFailed) != (errs[i] != nil) {
			t.Fatalf("key %s: %v (error %v), want %v", keys[i], st, errs[i], want(i))
		}
	}
}

func all(st invalidate.KeyStatus) func(int) invalidate.KeyStatus {
	return func(int) invalidate.KeyStatus { return st }
}

// classify invalidates one record of keys, retrying what fails for now
// briefly: the code's own verdict on the keys' errors.
func classify(ctx context.Context, t *testing.T, cache invalidate.Cache, keys ...string) invalidate.Result {
	t.Helper()
	rules, err := invalidate.ParseRules([]byte(`allowedKeys: ["*"]`)) // the cache alone refuses
	if err != nil {
		t.Fatal(err)
	}
	batch := invalidate.Decoded([]invalidate.Record{{ID: "contract", Changes: []events.Change{{Keys: keys}}}})
	batch.RetryFor = 100 * time.Millisecond
	inv := invalidate.New(cache, invalidate.Options{Rules: rules, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	return inv.Invalidate(ctx, batch).Results[0]
}

func deletedOrAbsent(t *testing.T, c UnderTest) {
	keys := newKeys(300) // on every node of a cluster
	c.Set(t, keys...)
	var even []string
	for i := 0; i < len(keys); i += 2 {
		even = append(even, keys[i])
	}
	status, errs := unlink(t.Context(), c.Cache, even)
	expect(t, even, status, errs, all(invalidate.KeyDeleted))
	status, errs = unlink(t.Context(), c.Cache, keys)
	expect(t, keys, status, errs, func(i int) invalidate.KeyStatus {
		if i%2 == 0 {
			return invalidate.KeyAbsent
		}
		return invalidate.KeyDeleted
	})
}

// redirected: valkey-go follows a redirect itself; the key is deleted, and
// the others of the call are not disturbed.
func redirected(t *testing.T, c UnderTest, ask bool) {
	if c.Reshard == nil {
		t.Skip("this cache's slots stay put: the run on a private cluster reshards")
	}
	keys := newKeys(20)
	c.Set(t, keys[1:]...)
	c.Reshard(t, keys[0], ask)
	status, errs := unlink(t.Context(), c.Cache, keys)
	expect(t, keys, status, errs, all(invalidate.KeyDeleted))
}

func refusedKey(t *testing.T, c UnderTest) {
	keys := newKeys(2)
	denied := "session:contract:" + rand.Text()[:8]
	c.Set(t, keys...)
	call := []string{keys[0], denied, keys[1]}
	status, errs := unlink(t.Context(), c.Cache, call)
	expect(t, call, status, errs, func(i int) invalidate.KeyStatus {
		if i == 1 {
			return invalidate.KeyFailed
		}
		return invalidate.KeyDeleted
	})
	if !strings.HasPrefix(errs[1].Error(), "NOPERM") {
		t.Fatalf("refused key: %v, want NOPERM", errs[1])
	}
	if res := classify(t.Context(), t, c.Cache, denied); res.Err == nil || res.Transient {
		t.Fatalf("a record of the refused key: %+v, want failed for good", res)
	}
}

func refusedConnection(t *testing.T, c UnderTest) {
	key := newKeys(1)[0]
	down := c.Down(t, key)
	// The first attempt may find instead a connection that was open lost
	// (EOF); the next ones are refused.
	status, errs := unlink(t.Context(), down, []string{key})
	expect(t, []string{key}, status, errs, all(invalidate.KeyFailed))
	// A busy machine may dial the node while it is still going down: the
	// dial times out rather than being refused, the cache out of reach all
	// the same.
	res := classify(t.Context(), t, down, key)
	var netErr net.Error
	if !res.Transient || !errors.Is(res.Err, syscall.ECONNREFUSED) && !(errors.As(res.Err, &netErr) && netErr.Timeout()) {
		t.Fatalf("a record of the key: %+v, want failed for now, refused or timed out", res)
	}
}

func deadline(t *testing.T, c UnderTest) {
	keys := newKeys(20)
	c.Set(t, keys...)
	past, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	status, errs := unlink(past, c.Cache, keys)
	expect(t, keys, status, errs, all(invalidate.KeyFailed))
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("key %s: %v, want the deadline", keys[i], err)
		}
	}
	if res := classify(past, t, c.Cache, keys...); !res.Transient || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("a record of the keys: %+v, want failed for now, the deadline", res)
	}
	// Leave no key in a slot a later reshard moves.
	if _, errs = unlink(t.Context(), c.Cache, keys); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
}

func taggedEntries(t *testing.T, c UnderTest) {
	prefix := "cache:tag:contract:" + rand.Text()[:8] + ":"
	keys := newKeys(30)
	c.Tag(t, prefix+"t", keys...)
	invalidateTags := func(prefix string) invalidate.Result {
		rules, err := invalidate.NewRules(invalidate.RulesConfig{TagPrefix: prefix, AllowedKeys: []string{"*"}}) // the cache alone refuses
		if err != nil {
			t.Fatal(err)
		}
		batch := invalidate.Decoded([]invalidate.Record{{ID: "contract", Changes: []events.Change{{Tags: []string{"t"}}}}})
		batch.RetryFor = 100 * time.Millisecond
		inv := invalidate.New(c.Cache, invalidate.Options{Rules: rules, TagPage: 7, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		return inv.Invalidate(t.Context(), batch).Results[0]
	}
	if res := invalidateTags(prefix); res.Err != nil || len(res.Tags) != 1 || res.Tags[0].Deleted != 30 || len(res.Tags[0].Entries) != 30 {
		t.Fatalf("the tag's record: %+v, want its 30 entries deleted, and named", res)
	}
	status, errs := unlink(t.Context(), c.Cache, keys)
	expect(t, keys, status, errs, all(invalidate.KeyAbsent))
	if res := invalidateTags(prefix); res.Err != nil || (res.Tags[0].Deleted+res.Tags[0].Absent+len(res.Tags[0].Entries) != 0 || res.Tags[0].Incomplete) {
		t.Fatalf("the tag again: %+v, want nothing left in it", res)
	}
	if res := invalidateTags("session:contract:" + rand.Text()[:8] + ":"); res.Err == nil || res.Transient {
		t.Fatalf("a refused tag's record: %+v, want failed for good", res)
	}
}
