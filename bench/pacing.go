package main

import (
	"context"
	"log"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"
	xrate "golang.org/x/time/rate"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// pacingVsRate measures why the worker paces with a pacer of its own
// rather than golang.org/x/time/rate: the wait of a first delete sent while
// a tag of 10,000 entries is paged at the default budget, through the
// Invalidator's pacer, and through an unpaced Invalidator whose client
// waits on a rate.Limiter of the same budget. rate.Limiter serves waiters
// in the order they came: the first delete waits behind every tag chunk
// reserved before it.
func pacingVsRate(ctx context.Context, s server, rules *invalidate.Rules) (pacer, limiter float64) {
	paced := invalidate.New(invalidate.Valkey(s.client), invalidate.Options{Rules: rules, ECPUPerSecond: defaultBudget})
	limited := invalidate.New(invalidate.Valkey(&limitedClient{Client: s.client, l: xrate.NewLimiter(defaultBudget, 1000)}), invalidate.Options{Rules: rules})
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

// limitedClient waits on l before each DoMulti, for its commands' cost as
// the worker's model counts a request: 1 ECPU per KB sent, at least 1 a
// command (the replies' bytes left out, in rate.Limiter's favour).
type limitedClient struct {
	valkey.Client
	l *xrate.Limiter
}

func (c *limitedClient) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	var cost float64
	for _, cmd := range multi {
		n := 0
		for _, arg := range cmd.Commands() {
			n += len(arg)
		}
		cost += max(1, float64(n)/1024)
	}
	if err := c.l.WaitN(ctx, int(math.Ceil(cost))); err != nil {
		out := make([]valkey.ValkeyResult, len(multi))
		for i := range out {
			out[i] = valkey.NewErrorResult(err)
		}
		return out
	}
	return c.Client.DoMulti(ctx, multi...)
}
