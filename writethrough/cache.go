package writethrough

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"time"

	"github.com/valkey-io/valkey-go"
	"golang.org/x/sync/singleflight"

	"github.com/invalidator-go/invalidator/internal/tagset"
)

var (
	// ErrNotFound is returned by a loader when the value does not exist; Get
	// caches that for NegativeTTL and returns it.
	ErrNotFound = errors.New("writethrough: not found")
	// ErrBusy is returned by Get when another process holds the key's lease
	// past the wait and OnLeaseTimeout is FailBusy.
	ErrBusy = errors.New("writethrough: another loader holds the key")
)

// Cache is a cache-aside read path and write path for values of type V,
// safe for concurrent use.
type Cache[V any] struct {
	client    valkey.Client
	opts      Options[V]
	breaker   breaker
	misses    singleflight.Group
	refreshes singleflight.Group
	directs   *directs[V]
	// What it found at its keys and dropped (Stats).
	foreign, undecodable, staleLeases finding
}

// New returns a Cache storing in client.
func New[V any](client valkey.Client, opts Options[V]) *Cache[V] {
	if opts.TTL <= 0 {
		opts.TTL = 10 * time.Minute
	}
	if opts.Jitter == 0 {
		opts.Jitter = 0.1
	}
	opts.Jitter = max(opts.Jitter, 0)
	if opts.Beta == 0 {
		opts.Beta = 1
	}
	opts.Beta = max(opts.Beta, 0)
	if opts.NegativeTTL <= 0 {
		opts.NegativeTTL = 30 * time.Second
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 3 * time.Second
	}
	// The server counts in milliseconds: less would be PX 0, an error.
	opts.TTL, opts.NegativeTTL, opts.LeaseTTL = max(opts.TTL, time.Millisecond), max(opts.NegativeTTL, time.Millisecond), max(opts.LeaseTTL, time.Millisecond)
	if opts.WaitStep <= 0 {
		opts.WaitStep = 10 * time.Millisecond
	}
	if opts.CacheTimeout <= 0 {
		opts.CacheTimeout = 150 * time.Millisecond
	}
	if opts.BreakerThreshold == 0 {
		opts.BreakerThreshold = 5
	}
	if opts.BreakerCoolDown <= 0 {
		opts.BreakerCoolDown = time.Second
	}
	if opts.TagPrefix == "" {
		opts.TagPrefix = tagset.DefaultPrefix
	}
	if opts.Codec == nil {
		opts.Codec = JSONCodec[V]{}
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Rand == nil {
		opts.Rand = randv2.Float64
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 100
	}
	c := &Cache[V]{client: client, opts: opts}
	c.foreign.msg = "writethrough: a foreign value dropped: not a writethrough entry"
	c.undecodable.msg = "writethrough: an entry dropped: its payload does not decode"
	c.staleLeases.msg = "writethrough: a stale lease dropped: it would not expire within LeaseTTL"
	c.directs = newDirects[V](opts.MaxConcurrentLoads)
	c.breaker = breaker{threshold: int32(max(opts.BreakerThreshold, 0)), coolDown: opts.BreakerCoolDown, clock: opts.Clock}
	return c
}

// fillScript sets KEYS[1] to ARGV[2] with a lifetime of ARGV[3] ms, but only
// while the key still holds the entry stamped ARGV[1]: the loader's lease,
// or the value an early refresh or a renewal started from. An invalidation
// in between deletes that entry, and the fill is dropped. Valkey 9's
// SET … IFEQ cannot stand in: it compares whole values, this the stamp.
var fillScript = tagset.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or string.match(cur, '^wt1|%a|([^|]*)|') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`)

// maxAttempts bounds Get's passes: a key invalidated again and again while
// a caller waits does not keep it forever.
const maxAttempts = 4

// Get returns the value of key, loading it with load on a miss. load
// returns ErrNotFound when the value does not exist. When the cache does
// not answer within CacheTimeout, or the breaker is open, Get loads
// directly and does not fill: the cache speeds reads up, it does not gate
// them. With a Local tier, what it holds is served from memory, and a hit
// in the shared cache is kept there; a value loaded is kept at its next
// read, once it is in the shared cache, whose deletes are announced.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	var zero V
	v, err, keep, ok := c.fromLocal(key)
	if ok {
		return v, err
	}
	for range maxAttempts {
		raw, err := c.do(ctx, c.client.B().Get().Key(key).Build()).AsBytes()
		if valkey.IsValkeyNil(err) {
			v, err, retry := c.miss(ctx, key, load)
			if !retry {
				return v, err
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return zero, ctx.Err()
			}
			if c.dropOtherType(ctx, key, err) {
				continue
			}
			if errors.Is(err, ErrCacheUnavailable) {
				return c.outage(ctx, key, keep, load)
			}
			return c.direct(ctx, key, load)
		}
		e, err := decodeEntry(raw)
		if err != nil {
			c.drop(ctx, key, string(raw), &c.foreign)
			continue
		}
		if e.kind == kindLease {
			v, err, retry := c.wait(ctx, key, string(raw), load)
			if !retry {
				return v, err
			}
			continue
		}
		vouched := c.registered(ctx, []string{key}, []entry{e})[0]
		if v, err, ok := c.hit(ctx, key, e, raw, vouched, func(string) func(context.Context) (V, error) { return load }); ok {
			keep.keep(v, err, len(raw), e.expiry)
			return v, err
		}
	}
	return c.direct(ctx, key, load)
}

// hit serves a cached entry, refreshing it early when XFetch says so or
// renewing it; vouched is what its tags said of it (registered), and
// loader gives key's loader, only when it loads. ok is false when the key must be read again: the entry no longer decodes or is
// no longer registered in its tags (it is dropped), or it changed while
// being refreshed.
func (c *Cache[V]) hit(ctx context.Context, key string, e entry, raw []byte, vouched error, loader func(key string) func(context.Context) (V, error)) (v V, err error, ok bool) {
	switch {
	case errors.Is(vouched, errUnregistered):
		c.drop(ctx, key, string(raw), nil) // a tag was invalidated or lost
		return v, nil, false
	case vouched != nil && ctx.Err() != nil:
		return v, ctx.Err(), true
	case vouched != nil:
		v, err = c.direct(ctx, key, loader(key)) // the value cannot be vouched for
		return v, err, true
	}
	now := c.opts.Clock.Now()
	life := c.opts.TTL
	if e.kind == kindNotFound {
		life = c.opts.NegativeTTL
	}
	switch {
	case c.opts.Renew > 0 && e.kind != kindTagged && e.expiry.Sub(now) < time.Duration(c.opts.Renew*float64(life)):
		c.renew(ctx, key, e)
	case c.refreshEarly(e, now):
		v, err, retry := c.refresh(ctx, key, e, loader(key))
		if retry {
			return v, nil, false
		}
		if err == nil || errors.Is(err, ErrNotFound) {
			return v, err, true
		}
		// The source failed: the cached value is still good until it expires.
	}
	if e.kind == kindNotFound {
		return v, ErrNotFound, true
	}
	v, err = c.opts.Codec.Unmarshal(e.payload)
	if err != nil {
		c.drop(ctx, key, string(raw), &c.undecodable, "error", err.Error())
		return v, nil, false
	}
	return v, nil, true
}

// miss loads a missing key under a lease. retry says to read the key again:
// another process took the lease first, or this caller joined a load whose
// fill was cancelled by an invalidation, so the value may predate a write
// the caller must see.
func (c *Cache[V]) miss(ctx context.Context, key string, load func(context.Context) (V, error)) (v V, err error, retry bool) {
	o, led, err := shared(ctx, &c.misses, key, func(ctx context.Context) outcome[V] {
		clock, err := c.clock(ctx)
		if err != nil {
			v, err := load(ctx)
			return outcome[V]{v: v, err: err}
		}
		token := stamp()
		lease := entry{kind: kindLease, stamp: token}.encode()
		err = c.do(ctx, c.client.B().Set().Key(key).Value(lease).Nx().Px(c.opts.LeaseTTL).Build()).Error()
		if valkey.IsValkeyNil(err) {
			return outcome[V]{retry: true} // someone else's lease or value
		}
		if err != nil {
			// A SET that timed out may have taken the lease all the same:
			// readers would wait on it for a fill that never comes.
			c.dropStamped(ctx, key, token)
			v, err := load(ctx)
			return outcome[V]{v: v, err: err}
		}
		return c.loadAndFill(ctx, key, entry{stamp: token}, true, clock, load)
	})
	switch {
	case errors.Is(err, errWaitedOut):
		v, err := c.direct(ctx, key, load) // not filled: the load it joined will be
		return v, err, false
	case err != nil:
		return v, err, false
	case o.retry, !led && !o.filled && (o.err == nil || errors.Is(o.err, ErrNotFound)):
		return v, nil, true
	}
	return o.v, o.err, false
}

// refresh recomputes a value ahead of its expiry and replaces it, unless it
// changed or was invalidated meanwhile; then the callers that shared the
// refresh read the key again (retry).
func (c *Cache[V]) refresh(ctx context.Context, key string, from entry, load func(context.Context) (V, error)) (v V, err error, retry bool) {
	o, led, err := shared(ctx, &c.refreshes, key+"\x00"+from.stamp, func(ctx context.Context) outcome[V] {
		clock, err := c.clock(ctx)
		if err != nil {
			return outcome[V]{err: err}
		}
		return c.loadAndFill(ctx, key, from, false, clock, load)
	})
	if err != nil {
		return v, err, false
	}
	if !led && !o.filled && (o.err == nil || errors.Is(o.err, ErrNotFound)) {
		return v, nil, true
	}
	return o.v, o.err, false
}

// loadAndFill loads the value, timing it, and stores it (or "not found")
// over the entry from, if the key still holds it and, for a value with
// tags, none of them was invalidated since the tag clock read clock,
// before the load. When the load fails, a lease is dropped so that the
// next caller tries at once; a value being refreshed is kept. The stored
// version is the loaded value's (VersionOf) and never below from's: the
// load ran after from was read.
func (c *Cache[V]) loadAndFill(ctx context.Context, key string, from entry, lease bool, clock int64, load func(context.Context) (V, error)) outcome[V] {
	start := c.opts.Clock.Now()
	v, err := load(ctx)
	delta := c.opts.Clock.Now().Sub(start)
	e := entry{kind: kindValue, stamp: stamp(), delta: delta, version: from.version}
	ttl := c.jittered(c.opts.TTL)
	switch {
	case errors.Is(err, ErrNotFound):
		e.kind, ttl = kindNotFound, c.opts.NegativeTTL
	case err != nil:
		if lease {
			c.dropStamped(ctx, key, from.stamp)
		}
		return outcome[V]{v: v, err: err}
	default:
		if c.opts.VersionOf != nil {
			e.version = max(e.version, c.opts.VersionOf(v))
		}
		if e.payload, err = c.opts.Codec.Marshal(v); err != nil {
			if lease {
				c.dropStamped(ctx, key, from.stamp)
			}
			return outcome[V]{v: v, err: fmt.Errorf("writethrough: encode %s: %w", key, err)}
		}
	}
	e.expiry = c.opts.Clock.Now().Add(ttl)
	if e.kind == kindValue && c.opts.TagsOf != nil {
		// Registered before the fill, so that an invalidation of a tag
		// finds the key from then on; not stored when one came since clock.
		if ok, err := c.tag(ctx, key, &e, v, clock, ttl); !ok {
			if lease {
				c.dropStamped(ctx, key, from.stamp)
			}
			return outcome[V]{v: v, err: err}
		}
	}
	// A failed fill leaves the key to the next reader; the value loaded is
	// still the answer of the caller that loaded it. Its lease is given back,
	// so that readers do not wait on it: a fill that lands later is still
	// checked against it.
	filled, err := c.exec(ctx, fillScript, key, from.stamp, e.encode(), ms(ttl)).AsInt64()
	if err != nil && lease {
		c.dropStamped(ctx, key, from.stamp)
	}
	o := outcome[V]{v: v, filled: filled == 1}
	if e.kind == kindNotFound {
		o.err = ErrNotFound
	}
	return o
}

// wait waits for another process's load of key, whose lease is lease,
// for half the time ctx has left at most: a caller with a deadline then
// has the other half to load. A stale lease, which no loader will fill, is
// dropped instead. retry says to read the key again.
func (c *Cache[V]) wait(ctx context.Context, key, lease string, load func(context.Context) (V, error)) (v V, err error, retry bool) {
	if c.dropStale(ctx, key, lease) {
		return v, nil, true
	}
	deadline := time.Now().Add(c.opts.LeaseTTL)
	if d, ok := ctx.Deadline(); ok && time.Until(d) < 2*c.opts.LeaseTTL {
		deadline = time.Now().Add(time.Until(d) / 2)
	}
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return v, ctx.Err(), false
		case <-time.After(c.opts.WaitStep):
		}
		raw, err := c.do(ctx, c.client.B().Get().Key(key).Build()).AsBytes()
		if err != nil {
			return v, nil, true // gone (invalidated, or the loader failed) or unreachable: start over
		}
		if e, err := decodeEntry(raw); err != nil || e.kind != kindLease {
			return v, nil, true
		}
	}
	if c.opts.OnLeaseTimeout == FailBusy {
		return v, ErrBusy, false
	}
	v, err = c.direct(ctx, key, load)
	return v, err, false
}

// clock reads the tag clock for a fill, when values have tags: before the
// load, so that an invalidation of a tag after it shows in the tag.
func (c *Cache[V]) clock(ctx context.Context) (int64, error) {
	if c.opts.TagsOf == nil {
		return 0, nil
	}
	return c.tick(ctx)
}

func ms(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }

// stamp returns a random token identifying one write.
func stamp() string { return rand.Text()[:16] }
