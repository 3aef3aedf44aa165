package writethrough

import (
	"context"
	"errors"
)

// outage reads key while the cache does not answer: what the local tier
// kept for StaleIfError, else a direct load, which the tier then keeps
// (keep) until the cache answers.
func (c *Cache[V]) outage(ctx context.Context, key string, keep keeper[V], load func(context.Context) (V, error)) (V, error) {
	if v, err, ok := c.stale(key); ok {
		return v, err
	}
	v, err := c.directs.load(ctx, key, load)
	if err == nil || errors.Is(err, ErrNotFound) {
		keep.keep(v, err, fromSource, c.opts.Clock.Now().Add(c.opts.TTL))
	}
	return v, err
}

// fromSource is the size given a local tier for a value loaded while the
// cache did not answer: kept only for StaleIfError.
const fromSource = -1

// direct loads key without filling: the cache could not be used for it.
func (c *Cache[V]) direct(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	return c.directs.load(ctx, key, load)
}

// stale serves key from what the local tier kept when it lost its
// subscription (near.Options.StaleIfError): only ever asked while the
// cache does not answer.
func (c *Cache[V]) stale(key string) (v V, err error, ok bool) {
	if c.opts.Local == nil || c.opts.TagsOf != nil {
		return v, nil, false
	}
	v, notFound, ok := c.opts.Local.Stale(key)
	if ok && notFound {
		err = ErrNotFound
	}
	return v, err, ok
}

// answered tells the local tier that the cache answered: it serves
// nothing stale from then on.
func (c *Cache[V]) answered() {
	if c.opts.Local != nil {
		c.opts.Local.Answered()
	}
}
