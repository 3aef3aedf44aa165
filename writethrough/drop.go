package writethrough

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/valkey-io/valkey-go"
)

// Stats count what a Cache found at its keys that no Cache of its kind
// stores there, since it was made. Each was dropped, and its key loaded
// again: a count that grows says that something else writes the keys.
type Stats struct {
	// Foreign values: not writethrough entries at all.
	Foreign int64
	// Undecodable entries: writethrough entries whose payload the Codec
	// refuses (another type, another codec).
	Undecodable int64
	// StaleLeases: leases that would not expire within LeaseTTL — without
	// a TTL (PERSIST, or a SET from elsewhere), or with a longer one —,
	// which no loader of this Cache holds.
	StaleLeases int64
}

// Stats tells what the Cache found and dropped.
func (c *Cache[V]) Stats() Stats {
	return Stats{Foreign: c.foreign.n.Load(), Undecodable: c.undecodable.n.Load(), StaleLeases: c.staleLeases.n.Load()}
}

// A finding is one kind of thing found at a key that should not be there:
// counted for Stats, and logged, once dropped.
type finding struct {
	n   atomic.Int64
	msg string
}

func (f *finding) found(log *slog.Logger, key string, attrs ...any) {
	f.n.Add(1)
	log.Warn(f.msg, append([]any{"key", key}, attrs...)...)
}

// dropScript deletes KEYS[1] only while it still holds exactly ARGV[1].
var dropScript = tagset.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// drop deletes raw, what key holds, unless it changed: an entry whose tags
// were invalidated (f nil), or something found there that should not be.
func (c *Cache[V]) drop(ctx context.Context, key, raw string, f *finding, attrs ...any) {
	n, err := c.exec(ctx, dropScript, key, raw).AsInt64()
	if err == nil && n == 1 && f != nil {
		f.found(c.opts.Logger, key, append([]any{"bytes", len(raw)}, attrs...)...)
	}
}

// otherTypeScript deletes KEYS[1] while it holds a value that is not a
// string (a hash, a list...), which GET refuses with WRONGTYPE. It uses
// the commands a Cache runs anyway, GET and DEL, so that a service's user
// needs no other.
var otherTypeScript = tagset.NewScript(`
local cur = redis.pcall('GET', KEYS[1])
if type(cur) ~= 'table' or not cur.err or string.sub(cur.err, 1, 10) ~= 'WRONGTYPE ' then return 0 end
return redis.call('DEL', KEYS[1])`)

// dropOtherType deletes key when err, its GET's, is a reply of the cache
// and the key holds a value of another type than a string: a foreign
// value, which Get would otherwise load around, never filling, until the
// key is invalidated. It reports whether it did.
func (c *Cache[V]) dropOtherType(ctx context.Context, key string, err error) bool {
	var reply *valkey.ValkeyError
	if !errors.As(err, &reply) || errors.Is(err, ErrCacheUnavailable) {
		return false
	}
	n, err := c.exec(ctx, otherTypeScript, key).AsInt64()
	if err != nil || n != 1 {
		return false
	}
	c.foreign.found(c.opts.Logger, key, "error", reply.Error())
	return true
}

// dropStampedScript deletes KEYS[1] only while it holds the entry stamped
// ARGV[1].
var dropStampedScript = tagset.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and string.match(cur, '^wt1|%a|([^|]*)|') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// dropStamped deletes key while it holds the entry stamped from: a lease
// given back.
func (c *Cache[V]) dropStamped(ctx context.Context, key, from string) {
	_ = c.exec(ctx, dropStampedScript, key, from).Error()
}

// staleLeaseScript deletes KEYS[1] while it holds exactly ARGV[1], a
// lease, and will not expire within ARGV[2] ms, the LeaseTTL: a loader
// takes its lease with SET NX PX LeaseTTL, so such a lease is no loader's,
// or one whose TTL was taken away (PERSIST) or that set its own. It
// returns the lease's TTL in ms when it deleted it (-1 for none), else 0.
var staleLeaseScript = tagset.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl >= 0 and ttl <= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
return ttl`)

// dropStale deletes the lease raw at key if it is stale, and reports
// whether it did. Deleting a lease is what an invalidation does: the fill
// of whoever holds it, a compare-and-set on its stamp, then fails, so no
// value it loaded is stored; and the caller takes a lease of its own before
// it loads. Compared with the exact lease read, atomically with its TTL, it
// never deletes a lease taken since.
func (c *Cache[V]) dropStale(ctx context.Context, key, raw string) bool {
	ttl, err := c.exec(ctx, staleLeaseScript, key, raw, ms(c.opts.LeaseTTL)).AsInt64()
	if err != nil || ttl == 0 {
		return false
	}
	c.staleLeases.found(c.opts.Logger, key, "ttl_ms", ttl)
	return true
}
