package writethrough

import (
	"context"
	"errors"
	"fmt"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/valkey-io/valkey-go"
)

// ErrCacheUnavailable marks a cache call that found the cache down: no
// answer within Options.CacheTimeout, no connection, CLUSTERDOWN, TRYAGAIN
// or LOADING, or the breaker open. Get never returns it: it loads directly
// instead. Writes return it within ErrInvalidate.
var ErrCacheUnavailable = errors.New("writethrough: cache unavailable")

var errBreakerOpen = fmt.Errorf("%w: breaker open, the cache was not asked", ErrCacheUnavailable)

// do runs cmd on the cache, as call does.
func (c *Cache[V]) do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	return c.call(ctx, func(ctx context.Context) valkey.ValkeyResult { return c.client.Do(ctx, cmd) })
}

// exec runs script on key, as callAll does.
func (c *Cache[V]) exec(ctx context.Context, script tagset.Script, key string, args ...string) valkey.ValkeyResult {
	return c.each(ctx, script, []string{key}, func(int) []string { return args })[0]
}

// call runs fn through the breaker, as callAll does.
func (c *Cache[V]) call(ctx context.Context, fn func(context.Context) valkey.ValkeyResult) valkey.ValkeyResult {
	return c.callAll(ctx, 1, func(ctx context.Context) []valkey.ValkeyResult { return []valkey.ValkeyResult{fn(ctx)} })[0]
}

// pipeline is how many commands a call sends at once at most, each
// pipeline within CacheTimeout: a call for many keys, or for a value of
// many tags, is not an outage.
const pipeline = 1000

// send sends the n commands cmd gives, a pipeline at a time, as callAll
// does each.
func (c *Cache[V]) send(ctx context.Context, n int, cmd func(i int) valkey.Completed) []valkey.ValkeyResult {
	resps := make([]valkey.ValkeyResult, 0, n)
	for from := 0; from < n; from += pipeline {
		part := min(pipeline, n-from)
		resps = append(resps, c.callAll(ctx, part, func(ctx context.Context) []valkey.ValkeyResult {
			cmds := make(valkey.Commands, part)
			for i := range cmds {
				cmds[i] = cmd(from + i)
			}
			return c.client.DoMulti(ctx, cmds...)
		})...)
	}
	return resps
}

// callAll runs fn, which sends n commands at once, through the breaker, for
// at most CacheTimeout; the error of a command that found the cache down
// wraps ErrCacheUnavailable.
func (c *Cache[V]) callAll(ctx context.Context, n int, fn func(context.Context) []valkey.ValkeyResult) []valkey.ValkeyResult {
	probe, ok := c.breaker.allow()
	if !ok {
		return failed(n, errBreakerOpen)
	}
	bounded, cancel := context.WithTimeout(ctx, c.opts.CacheTimeout)
	defer cancel()
	var resps []valkey.ValkeyResult
	if probe || c.breaker.wary() {
		resps = detached(bounded, n, fn)
	} else {
		resps = fn(bounded)
	}
	found, answered := false, false // some command found the cache down; some was answered
	for _, resp := range resps {
		down := cacheerr.Down(resp.Error())
		found, answered = found || down, answered || !down
	}
	if answered {
		c.answered()
	}
	switch {
	case !found:
		c.breaker.done(probe, up)
	case ctx.Err() != nil:
		c.breaker.done(probe, unknown) // the caller gave up: that says nothing of the cache
	default:
		c.breaker.done(probe, down)
		for i, resp := range resps {
			if err := resp.Error(); cacheerr.Down(err) {
				resps[i] = valkey.NewErrorResult(fmt.Errorf("%w: %w", ErrCacheUnavailable, err))
			}
		}
	}
	return resps
}

// failed is n results of err.
func failed(n int, err error) []valkey.ValkeyResult {
	resps := make([]valkey.ValkeyResult, n)
	for i := range resps {
		resps[i] = valkey.NewErrorResult(err)
	}
	return resps
}

// detached runs fn on a goroutine of its own, and returns when it does or
// when ctx ends, leaving it to finish alone. A deadline bounds valkey-go's
// retries and its wait for a reply, but not its wait for a connection that
// another caller is opening, such as its own topology refresh: that lasts
// up to the dialer's timeout (5 s by default) whatever the deadline. This
// costs a goroutine per call, so call pays it only while the cache may be
// failing.
func detached(ctx context.Context, n int, fn func(context.Context) []valkey.ValkeyResult) []valkey.ValkeyResult {
	reply := make(chan []valkey.ValkeyResult, 1)
	go func() { reply <- fn(ctx) }()
	select {
	case resps := <-reply:
		return resps
	case <-ctx.Done():
		return failed(n, ctx.Err())
	}
}
