package cachetest

import (
	"context"
	"encoding/binary"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/invalidate"
)

// ErrRefused stands for a refused connection to the cache, which valkey-go
// returns as the dialer's error, a *net.OpError.
var ErrRefused error = &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7001},
	Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// ErrNoPerm is the cache's refusal of a key to the user, the reply of
// Valkey and Redis 7 in the type valkey-go gives it, so that the code
// classes it as the real one: failed for good.
var ErrNoPerm = Reply("NOPERM this user has no permissions to access one of the keys used as arguments")

// Reply is the error reply msg as valkey-go reads it. Its only exported
// constructor of one is the reader of its client-side cache format: 7
// bytes of TTL, the type, the length, the string. The contract test
// (Contract) checks it against the real one.
func Reply(msg string) error {
	buf := binary.BigEndian.AppendUint64(append(make([]byte, 7), '-'), uint64(len(msg)))
	var m valkey.ValkeyMessage
	if err := m.CacheUnmarshalView(append(buf, msg...)); err != nil {
		panic(err)
	}
	return m.Error()
}

// Cache is an invalidate.Cache in memory, for tests that need
// nothing running. It holds every key until the key is deleted, and again
// once Set: a key is deleted once, then absent. Its tags hold the keys
// Tag registers in them until they are forgotten. Fail, when set, says
// that a key — or the key of a tag, for each page of it — fails at that
// attempt (counted from 1 per key), ErrRefused for a node down, ErrNoPerm
// for a key refused to the user.
type Cache struct {
	Fail func(key string, attempt int) error
	// Unlinked, when set, is told of every Unlink: its context and keys.
	Unlinked func(ctx context.Context, keys []string)
	// Forgetful deletes every key and remembers nothing, in constant
	// memory however many keys it is sent.
	Forgetful bool
	mu        sync.Mutex
	attempts  map[string]int
	deleted   map[string]bool              // since last Set
	tags      map[string]map[string]string // tag key → member → registration
	cursors   map[uint64]string            // a page's cursor → the last key before it
	clock     int64
}

// Tag stores keys and registers them in the tag at key, as fills of
// writethrough would.
func (f *Cache) Tag(key string, keys ...string) {
	f.Set(keys...)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tags == nil {
		f.tags = map[string]map[string]string{}
	}
	if f.tags[key] == nil {
		f.tags[key] = map[string]string{}
	}
	for _, k := range keys {
		f.clock++
		f.tags[key][k] = strconv.FormatInt(f.clock, 10)
	}
}

// Members are the keys registered in the tag at key.
func (f *Cache) Members(key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.tags[key]))
}

// Tick is invalidate.Cache's.
func (f *Cache) Tick(ctx context.Context, clock string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock++
	return f.clock, ctx.Err()
}

// Page is invalidate.Cache's: the members in key order.
func (f *Cache) Page(ctx context.Context, key string, reading int64, cursor uint64, count int) ([]invalidate.Member, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attempts == nil {
		f.attempts, f.deleted = map[string]int{}, map[string]bool{}
	}
	f.attempts[key]++
	err := ctx.Err()
	if err == nil && f.Fail != nil {
		err = f.Fail(key, f.attempts[key])
	}
	if err != nil {
		return nil, 0, err
	}
	keys := slices.Sorted(maps.Keys(f.tags[key]))
	if cursor > 0 { // after the last key of the page before
		after := f.cursors[cursor]
		keys = slices.DeleteFunc(keys, func(k string) bool { return k <= after })
	}
	var page []invalidate.Member
	for _, k := range keys[:min(max(count, 1), len(keys))] {
		page = append(page, invalidate.Member{Key: k, Registration: f.tags[key][k]})
	}
	if len(page) == len(keys) {
		return page, 0, nil
	}
	if f.cursors == nil {
		f.cursors = map[uint64]string{}
	}
	next := uint64(len(f.cursors) + 1)
	f.cursors[next] = page[len(page)-1].Key
	return page, next, nil
}

// Forget is invalidate.Cache's.
func (f *Cache) Forget(ctx context.Context, key string, members []invalidate.Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range members {
		if f.tags[key][m.Key] == m.Registration {
			delete(f.tags[key], m.Key)
		}
	}
	return ctx.Err()
}

// Set stores keys again, as a service filling the cache would.
func (f *Cache) Set(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.deleted, k)
	}
}

// Unlink is invalidate.Cache's.
func (f *Cache) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	if f.Unlinked != nil {
		f.Unlinked(ctx, keys)
	}
	if f.Forgetful {
		for i := range status {
			status[i] = invalidate.KeyDeleted
		}
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attempts == nil {
		f.attempts, f.deleted = map[string]int{}, map[string]bool{}
	}
	var errs []error
	for i, k := range keys {
		f.attempts[k]++
		err := ctx.Err()
		if err == nil && f.Fail != nil {
			err = f.Fail(k, f.attempts[k])
		}
		switch {
		case err == nil && f.deleted[k]:
			status[i] = invalidate.KeyAbsent
		case err == nil:
			status[i], f.deleted[k] = invalidate.KeyDeleted, true
		default:
			if errs == nil {
				errs = make([]error, len(keys))
			}
			status[i], errs[i] = invalidate.KeyFailed, err
		}
	}
	return errs
}

// Attempts tells how many times key was sent.
func (f *Cache) Attempts(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[key]
}
