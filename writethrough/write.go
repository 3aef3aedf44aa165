package writethrough

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/invalidator-go/invalidator/internal/tagset"
)

// ErrInvalidate wraps the cache error of a write whose database part
// succeeded: the key could not be invalidated or written, with
// ErrCacheUnavailable too when the cache was down. The database write is
// done: do not run it again. The event-driven invalidator deletes the key
// when the change's event arrives, and the TTL backstop expires it at the
// latest; until then readers may get the value from before the write. Treat
// the write as done and count the error; a caller that must read its own
// write reads the source, or calls Invalidate again once the cache answers.
var ErrInvalidate = errors.New("writethrough: database written, cache not updated")

// Write runs write — the database write — and then invalidates key. This is
// the default write path: a delete cannot be reordered into serving an old
// value, as a SET racing another writer's SET can.
func (c *Cache[V]) Write(ctx context.Context, key string, write func(context.Context) error) error {
	if err := write(ctx); err != nil {
		return err
	}
	return c.Invalidate(ctx, key)
}

// Invalidate deletes key, and drops it from the local tiers, this
// process's at once.
func (c *Cache[V]) Invalidate(ctx context.Context, key string) error {
	// A delete is safe to send twice: valkey-go may retry it within
	// CacheTimeout, over a connection that broke.
	err := c.do(ctx, c.client.B().Unlink().Key(key).Build().ToRetryable()).Error()
	if dropped := c.dropLocal(ctx, key); err == nil {
		err = dropped
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidate, key, err)
	}
	return nil
}

// writeScript stores ARGV[2] in KEYS[1] for ARGV[3] ms over a cached entry
// of a known, older version, in one atomic step: an older write finishing
// late never overwrites a newer one. Anything else — nothing cached, a
// loader's lease, an entry of unknown version — it deletes instead: a late
// write cannot tell whether a newer one was cached and invalidated since,
// so it must not fill, and deleting a lease cancels the fill of a load that
// may predate this write. It returns 1 when it stored, 0 when a newer
// version is cached, 2 when it invalidated.
var writeScript = tagset.NewScript(`
local cur = redis.call('GET', KEYS[1])
local version = cur and tonumber(string.match(cur, '^wt1|[vn]|[^|]*|(%-?%d+)|'))
if version and version > 0 then
  if version >= tonumber(ARGV[1]) then return 0 end
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
if cur then redis.call('DEL', KEYS[1]) end
return 2`)

// ErrVersion is returned by WriteThrough for a version below 1.
var ErrVersion = errors.New("writethrough: versions start at 1")

// WriteThrough runs write — the database write, which returns the value
// written and its version (from 1, increasing with every write of the key,
// below 2^53) — and then updates the cached value in place if an older
// version of it is cached. When none is, or its version is unknown (see
// Options.VersionOf), or values have tags, it invalidates the key, and the
// next read loads the value. Either way the local tiers drop the key. It
// reports whether the value was stored.
func (c *Cache[V]) WriteThrough(ctx context.Context, key string, write func(context.Context) (V, int64, error)) (bool, error) {
	v, version, err := write(ctx)
	if err != nil {
		return false, err
	}
	if c.opts.TagsOf != nil {
		// Only a fill under a lease may register a value in its tags.
		return false, c.Invalidate(ctx, key)
	}
	if version < 1 {
		return false, fmt.Errorf("%w: got %d for %s", ErrVersion, version, key)
	}
	payload, err := c.opts.Codec.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("writethrough: encode %s: %w", key, err)
	}
	ttl := c.jittered(c.opts.TTL)
	e := entry{kind: kindValue, stamp: stamp(), version: version, expiry: c.opts.Clock.Now().Add(ttl), payload: payload}
	stored, err := c.exec(ctx, writeScript, key, strconv.FormatInt(version, 10), e.encode(), ms(ttl)).AsInt64()
	if dropped := c.dropLocal(ctx, key); err == nil {
		err = dropped
	}
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrInvalidate, key, err)
	}
	return stored == 1, nil
}
