package writethrough

import (
	"context"
	"math"
	"time"
)

// refreshEarly is XFetch: recompute when now − Δ·β·ln(rand) ≥ expiry, which
// grows likelier as expiry nears and the value is costlier to compute.
func (c *Cache[V]) refreshEarly(e entry, now time.Time) bool {
	// −ln of a float64 in (0, 1) is below 37: further from expiry than
	// that many deltas, no draw can refresh (and none is drawn).
	if c.opts.Beta == 0 || 37*float64(e.delta)*c.opts.Beta < float64(e.expiry.Sub(now)) {
		return false
	}
	gap := -float64(e.delta) * c.opts.Beta * math.Log(c.opts.Rand())
	return now.Add(time.Duration(gap)).Compare(e.expiry) >= 0
}

// renew extends a hit to a full lifetime, unless it changed meanwhile.
func (c *Cache[V]) renew(ctx context.Context, key string, e entry) {
	from := e.stamp
	ttl := c.jittered(c.opts.TTL)
	if e.kind == kindNotFound {
		ttl = c.opts.NegativeTTL
	}
	e.stamp, e.expiry = stamp(), c.opts.Clock.Now().Add(ttl)
	_ = c.exec(ctx, fillScript, key, from, e.encode(), ms(ttl)).Error()
}

// jittered spreads ttl by Jitter.
func (c *Cache[V]) jittered(ttl time.Duration) time.Duration {
	f := 1 + c.opts.Jitter*(2*c.opts.Rand()-1)
	return max(time.Duration(float64(ttl)*f), time.Millisecond)
}
