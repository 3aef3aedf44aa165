package writethrough

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrOverloaded is returned by a read that would load directly — the cache
// down, or not usable for the key — while MaxConcurrentLoads loads already
// run, once its context ends; it wraps the context's error.
var ErrOverloaded = errors.New("writethrough: MaxConcurrentLoads loads already run")

// direct loads key without filling: the cache did not answer (down), or
// could not be used for it. While the cache is down, a local tier's
// StaleIfError entry is served instead. The direct loads of a key in this
// process at once share one, and MaxConcurrentLoads bounds them all.
func (c *Cache[V]) direct(ctx context.Context, key string, down bool, load func(context.Context) (V, error)) (V, error) {
	if down {
		if v, err, ok := c.stale(key); ok {
			return v, err
		}
	}
	var queued atomic.Bool // this caller's load waits for a slot
	o, _, err := shared(ctx, &c.directs, key, func(detached context.Context) outcome[V] {
		queued.Store(true)
		if err := c.enter(ctx); err != nil {
			return outcome[V]{err: err}
		}
		queued.Store(false)
		defer c.leave()
		v, err := load(detached)
		return outcome[V]{v: v, err: err}
	})
	if errors.Is(err, errWaitedOut) {
		return c.bounded(ctx, load)
	}
	if err != nil {
		if queued.Load() {
			err = fmt.Errorf("%w: %w", ErrOverloaded, err)
		}
		var zero V
		return zero, err
	}
	return o.v, o.err
}

// bounded loads within MaxConcurrentLoads.
func (c *Cache[V]) bounded(ctx context.Context, load func(context.Context) (V, error)) (V, error) {
	if err := c.enter(ctx); err != nil {
		var zero V
		return zero, err
	}
	defer c.leave()
	return load(ctx)
}

// enter takes one of MaxConcurrentLoads, waiting while ctx allows.
func (c *Cache[V]) enter(ctx context.Context) error {
	if c.loads == nil {
		return nil
	}
	select {
	case c.loads <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.loads <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrOverloaded, ctx.Err())
	}
}

func (c *Cache[V]) leave() {
	if c.loads != nil {
		<-c.loads
	}
}

// stale serves key from what the local tier kept when it lost its
// subscription (local.Options.StaleIfError): only ever asked while the
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
