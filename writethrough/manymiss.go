package writethrough

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"
)

// miss leases keys, loads those it leased and fills them, as Get's miss
// does each; it returns the keys whose lease another caller took.
func (m *many[V]) miss(ctx context.Context, keys []string) (again []string) {
	if len(keys) == 0 {
		return nil
	}
	c := m.c
	if ctx.Err() != nil {
		for _, k := range keys {
			m.answer(k, *new(V), ctx.Err())
		}
		return nil
	}
	// Leases taken are given back or filled whatever becomes of ctx, as
	// Get's are: each call within CacheTimeout.
	held := context.WithoutCancel(ctx)
	clock, err := c.clock(held)
	if err != nil {
		m.direct(ctx, keys, false)
		return nil
	}
	tokens := make([]string, len(keys))
	for i := range tokens {
		tokens[i] = stamp()
	}
	resps := c.send(held, len(keys), func(i int) valkey.Completed {
		lease := entry{kind: kindLease, stamp: tokens[i]}.encode()
		return c.client.B().Set().Key(keys[i]).Value(lease).Nx().Px(c.opts.LeaseTTL).Build()
	})
	var mine, unsure, unsureTokens []string
	tokenOf := map[string]string{}
	for i, r := range resps {
		switch err := r.Error(); {
		case valkey.IsValkeyNil(err):
			again = append(again, keys[i]) // someone else's lease or value
		case err != nil:
			unsure, unsureTokens = append(unsure, keys[i]), append(unsureTokens, tokens[i])
		default:
			mine, tokenOf[keys[i]] = append(mine, keys[i]), tokens[i]
		}
	}
	// A SET that failed may have taken the lease all the same: readers
	// would wait on it for a fill that never comes.
	m.dropLeases(held, unsure, unsureTokens)
	m.direct(ctx, unsure, false)
	m.chunks(ctx, mine, func(keys []string) {
		start := c.opts.Clock.Now()
		vs, err := m.batch(ctx, keys)
		m.fill(held, keys, tokenOf, clock, vs, err, c.opts.Clock.Now().Sub(start))
	})
	return again
}

// fill stores what the loader gave for keys (vs, err) over the leases
// held, as loadAndFill does each, and answers the keys.
func (m *many[V]) fill(ctx context.Context, keys []string, held map[string]string, clock int64, vs map[string]V, err error, delta time.Duration) {
	c := m.c
	if err != nil && !errors.Is(err, ErrNotFound) {
		m.dropLeases(ctx, keys, mapped(keys, held))
		for _, k := range keys {
			m.answer(k, *new(V), err)
		}
		return
	}
	var args [][]string
	var fillKeys, unfilled []string
	for _, k := range keys {
		v, ok := vs[k]
		e := entry{kind: kindValue, stamp: stamp(), delta: delta}
		ttl := c.jittered(c.opts.TTL)
		if !ok {
			e.kind, ttl = kindNotFound, c.opts.NegativeTTL
		} else {
			if c.opts.VersionOf != nil {
				e.version = c.opts.VersionOf(v)
			}
			if e.payload, err = c.opts.Codec.Marshal(v); err != nil {
				unfilled = append(unfilled, k)
				m.answer(k, v, fmt.Errorf("writethrough: encode %s: %w", k, err))
				continue
			}
		}
		e.expiry = c.opts.Clock.Now().Add(ttl)
		if e.kind == kindValue && c.opts.TagsOf != nil {
			if ok, err := c.tag(ctx, k, &e, v, clock, ttl); !ok {
				unfilled = append(unfilled, k)
				m.answer(k, v, err)
				continue
			}
		}
		fillKeys, args = append(fillKeys, k), append(args, []string{held[k], e.encode(), ms(ttl)})
		if ok {
			m.answer(k, v, nil)
		}
	}
	for i, r := range c.each(ctx, fillScript, fillKeys, func(i int) []string { return args[i] }) {
		if r.Error() != nil {
			unfilled = append(unfilled, fillKeys[i])
		}
	}
	m.dropLeases(ctx, unfilled, mapped(unfilled, held))
}

// dropLeases gives back the leases tokens of keys.
func (m *many[V]) dropLeases(ctx context.Context, keys, tokens []string) {
	if len(keys) > 0 {
		_ = m.c.each(ctx, dropStampedScript, keys, func(i int) []string { return []string{tokens[i]} })
	}
}

// wait waits for others' loads of keys, whose leases are leases, as Get's
// wait does each, all at once; it returns the keys to read again.
func (m *many[V]) wait(ctx context.Context, keys, leases []string) (again []string) {
	if len(keys) == 0 {
		return nil
	}
	c := m.c
	life := ms(c.opts.LeaseTTL)
	var waiting []string
	for i, r := range c.each(ctx, staleLeaseScript, keys, func(i int) []string { return []string{leases[i], life} }) {
		if ttl, err := r.AsInt64(); err == nil && ttl != 0 {
			c.staleLeases.found(c.opts.Logger, keys[i], "ttl_ms", ttl)
			again = append(again, keys[i])
			continue
		}
		waiting = append(waiting, keys[i])
	}
	deadline := time.Now().Add(c.opts.LeaseTTL)
	if d, ok := ctx.Deadline(); ok && time.Until(d) < 2*c.opts.LeaseTTL {
		deadline = time.Now().Add(time.Until(d) / 2)
	}
	for len(waiting) > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			for _, k := range waiting {
				m.answer(k, *new(V), ctx.Err())
			}
			return again
		case <-time.After(c.opts.WaitStep):
		}
		resps := m.gets(ctx, waiting)
		still := waiting[:0:0]
		for i, r := range resps {
			raw, err := r.AsBytes()
			if e, derr := decodeEntry(raw); err == nil && derr == nil && e.kind == kindLease {
				still = append(still, waiting[i])
				continue
			}
			again = append(again, waiting[i]) // gone, filled or unreachable: start over
		}
		waiting = still
	}
	if c.opts.OnLeaseTimeout == FailBusy {
		for _, k := range waiting {
			m.answer(k, *new(V), ErrBusy)
		}
		return again
	}
	m.direct(ctx, waiting, false)
	return again
}

// mapped is held's values of keys, in their order.
func mapped(keys []string, held map[string]string) []string {
	vs := make([]string, len(keys))
	for i, k := range keys {
		vs[i] = held[k]
	}
	return vs
}
