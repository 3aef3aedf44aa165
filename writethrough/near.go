package writethrough

import (
	"context"
	"time"
)

// Local is an in-process tier in front of the shared cache: Get serves
// what it holds without a round trip, and keeps what it reads from the
// shared cache. writethrough/near gives one that the invalidator's
// announcements keep consistent across processes.
type Local[V any] interface {
	// Get returns what the tier holds for key; ok is false when it holds
	// nothing. notFound is a cached "not found".
	Get(key string) (v V, notFound, ok bool)
	// Reserve is told that a read of key from the shared cache begins, and
	// returns what keeps its result: keep stores it, for no longer than
	// expiry, unless key was dropped or the tier forgot everything since
	// Reserve. size is the value's size in the shared cache, or -1 for
	// what Get loaded from the source while the shared cache did not
	// answer, which a tier keeps only for Stale. Reserve returns nil when
	// the tier keeps nothing now.
	Reserve(key string) (keep func(v V, notFound bool, size int, expiry time.Time))
	// Drop forgets keys at once, and tells the other processes' tiers to.
	Drop(ctx context.Context, keys ...string) error
	// Stale returns what the tier kept for key since it could no longer
	// vouch for what it holds, as near.Options.StaleIfError allows; Get
	// asks only when the shared cache did not answer.
	Stale(key string) (v V, notFound, ok bool)
	// Answered tells the tier that the shared cache answered: Stale gives
	// nothing from then on.
	Answered()
}

// keeper keeps what a Get read from the shared cache in the local tier;
// nil when there is none, or it keeps nothing now.
type keeper[V any] func(v V, notFound bool, size int, expiry time.Time)

// fromLocal serves key from the local tier when it holds it (ok); else it
// returns what keeps the read that follows. Tagged values skip the tier:
// their hits check their registrations in the shared cache, and a tag lost
// there (evicted, failed over behind) before its invalidation makes no
// announcement that a tier would hear.
func (c *Cache[V]) fromLocal(key string) (v V, err error, keep keeper[V], ok bool) {
	if c.opts.Local == nil || c.opts.TagsOf != nil {
		return v, nil, nil, false
	}
	v, notFound, ok := c.opts.Local.Get(key)
	if ok && notFound {
		err = ErrNotFound
	}
	if !ok {
		keep = c.opts.Local.Reserve(key)
	}
	return v, err, keep, ok
}

// keep stores a value read from the shared cache, or "not found" (err is
// then ErrNotFound), raw bytes long, until expiry at the latest.
func (k keeper[V]) keep(v V, err error, raw int, expiry time.Time) {
	if k != nil {
		k(v, err != nil, raw, expiry)
	}
}

// dropLocal drops key from the local tier and announces it, after the
// shared cache's delete: a read in this process between the two would
// keep the old value again.
func (c *Cache[V]) dropLocal(ctx context.Context, key string) error {
	if c.opts.Local == nil {
		return nil
	}
	return c.opts.Local.Drop(ctx, key)
}
