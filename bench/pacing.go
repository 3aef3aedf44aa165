package main

import (
	"context"
	"log"
	"strconv"
	"sync"
	"time"

	xrate "golang.org/x/time/rate"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// pacingVsRate measures why the worker paces with a pacer of its own
// rather than golang.org/x/time/rate: the wait of a first delete sent while
// a tag of 10,000 entries is paged at the default budget, through the
// Invalidator's pacer, and through an unpaced Invalidator whose cache
// waits on a rate.Limiter of the same budget (each UNLINK 1 ECPU, each
// script its bytes rounded up to KB). rate.Limiter serves waiters in the
// order they came: the first delete waits behind every tag chunk reserved
// before it.
func pacingVsRate(ctx context.Context, s server, rules *invalidate.Rules) (pacer, limiter float64) {
	paced := invalidate.New(invalidate.Valkey(s.client), invalidate.Options{Rules: rules, ECPUPerSecond: defaultBudget})
	limited := invalidate.New(&limitedCache{Cache: invalidate.Valkey(s.client), l: xrate.NewLimiter(defaultBudget, 500)}, invalidate.Options{Rules: rules})
	return firstDeleteWait(ctx, s, rules, paced, "pacer"), firstDeleteWait(ctx, s, rules, limited, "rate")
}

// firstDeleteWait is how long, in ms, a first delete of one key took when
// sent 2 s into the invalidation of a tag of 10,000 entries by inv.
func firstDeleteWait(ctx context.Context, s server, rules *invalidate.Rules, inv *invalidate.Invalidator, name string) float64 {
	tag := "pacing-" + name
	register(ctx, s.client, rules.TagKey(tag), "bench:pacing:"+name+":", 10_000)
	var wg sync.WaitGroup
	wg.Go(func() {
		inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{{ID: tag, Changes: []events.Change{{Tags: []string{tag}}}}}))
	})
	defer wg.Wait()
	time.Sleep(2 * time.Second)
	start := time.Now()
	rep := inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{{ID: "first", Changes: []events.Change{{Keys: []string{"bench:pacing:first:" + strconv.Itoa(int(start.UnixNano()))}}}}}))
	if err := rep.Results[0].Err; err != nil {
		log.Fatalf("pacing: %v", err)
	}
	return ms(time.Since(start))
}

// limitedCache waits on l before each command, for its cost.
type limitedCache struct {
	invalidate.Cache
	l *xrate.Limiter
}

func (c *limitedCache) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	if err := c.l.WaitN(ctx, len(keys)); err != nil {
		errs := make([]error, len(keys))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return c.Cache.Unlink(ctx, keys, status)
}

func (c *limitedCache) Page(ctx context.Context, key string, reading int64, cursor uint64, count int) ([]invalidate.Member, uint64, error) {
	if err := c.l.WaitN(ctx, count/10); err != nil { // a page of count members, ≈100 bytes each
		return nil, 0, err
	}
	return c.Cache.Page(ctx, key, reading, cursor, count)
}

func (c *limitedCache) Forget(ctx context.Context, key string, members []invalidate.Member) error {
	if err := c.l.WaitN(ctx, max(1, len(members)/10)); err != nil {
		return err
	}
	return c.Cache.Forget(ctx, key, members)
}
