package main

import (
	"context"
	"errors"
	"log"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/writethrough"
)

// tagSizes are the tags whose invalidation the tags group measures, by
// their number of entries.
var tagSizes = []int{10, 1_000, 100_000}

// tagsGroup measures tags: invalidating a tag of each size, as the worker
// does — its time, the commands sent, the worker's peak heap — against tag
// versions, the mechanism not chosen, whose invalidation is one command
// whatever the tag's size; and reading a tagged entry against an untagged
// one, and against a read that checks tag versions.
func tagsGroup(ctx context.Context, s server) {
	counted := &countingClient{Client: s.client}
	rules, err := invalidate.NewRules(invalidate.RulesConfig{TagPrefix: "bench:tag:", AllowedKeys: []string{"bench:*"}})
	if err != nil {
		log.Fatal(err)
	}
	inv := invalidate.New(invalidate.Valkey(counted), invalidate.Options{Rules: rules})
	for _, n := range tagSizes {
		var took, heap []float64
		var commands int64
		for round := range 3 {
			tag := "size-" + strconv.Itoa(n) + "-" + strconv.Itoa(round)
			register(ctx, s.client, rules.TagKey(tag), "bench:tagged:"+tag+":", n)
			counted.commands.Store(0)
			var rep invalidate.Report
			start := time.Now()
			heap = append(heap, peakHeap(func() {
				rep = inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{{ID: "bench", Changes: []events.Change{{Tags: []string{tag}}}}}))
			}))
			took = append(took, ms(time.Since(start)))
			if err := rep.Results[0].Err; err != nil || rep.Metrics.TagEntriesDeleted != n {
				log.Fatalf("tag of %d: %v, %d entries deleted", n, err, rep.Metrics.TagEntriesDeleted)
			}
			commands = counted.commands.Load()
		}
		size := strconv.Itoa(n)
		print("tag_invalidate_ms_"+size, median(took))
		print("tag_invalidate_commands_"+size, float64(commands))
		print("tag_invalidate_peak_heap_mib_"+size, median(heap))
	}
	print("tag_versions_invalidate_ms", versionsInvalidate(ctx, s.client))
	print("tag_versions_invalidate_commands", 1)

	// The one tag clock: how many readings a second its node gives, against
	// a plain INCR of one key; a fleet's tagged fills and batches ask at
	// most one reading an ECPU of the cache's budget, so one clock holds
	// while its ceiling is over the budget: the decision, printed.
	ticks, incrs := clockCeiling(ctx, s.client)
	print("tag_clock_ticks_per_s", median(ticks))
	print("tag_clock_vs_single_key_incr", medianRatio(ticks, incrs))
	print("tag_clock_ceiling_vs_template_cache_ecpus", median(ticks)/defaultCacheECPUs)
	if median(ticks) > defaultCacheECPUs {
		log.Printf("tags: one tag clock: %.0f readings a second, over the template's %d-ECPU cache: kept", median(ticks), defaultCacheECPUs)
	} else {
		log.Printf("tags: one tag clock: %.0f readings a second, under the template's %d-ECPU cache: spread it", median(ticks), defaultCacheECPUs)
	}

	untagged, tagged1, tagged10, versions10 := tagReads(ctx, s.client)
	print("tagged_get_hit_ops_per_sec_1", median(tagged1))
	print("tagged_get_hit_ops_per_sec_10", median(tagged10))
	print("tagged_get_hit_vs_untagged_1", medianRatio(tagged1, untagged))
	print("tagged_get_hit_vs_untagged_10", medianRatio(tagged10, untagged))
	print("tag_versions_get_hit_vs_untagged_10", medianRatio(versions10, untagged))
}

// countingClient counts the commands sent through it.
type countingClient struct {
	valkey.Client
	commands atomic.Int64
}

func (c *countingClient) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	c.commands.Add(int64(len(multi)))
	return c.Client.DoMulti(ctx, multi...)
}

// register stores n entries under prefix and registers them in the tag at
// key, as n fills through writethrough would have, a thousand at a time.
func register(ctx context.Context, client valkey.Client, key, prefix string, n int) {
	reg := tagset.Registration(1, time.Now().Add(time.Hour))
	for lo := 0; lo < n; lo += 1000 {
		cmds := make(valkey.Commands, 0, 1001)
		hset := client.B().Hset().Key(key).FieldValue()
		for i := lo; i < min(lo+1000, n); i++ {
			k := prefix + strconv.Itoa(i)
			cmds = append(cmds, client.B().Set().Key(k).Value("cached").Px(time.Hour).Build())
			hset = hset.FieldValue(k, reg)
		}
		for _, r := range client.DoMulti(ctx, append(cmds, hset.Build())...) {
			if err := r.Error(); err != nil {
				log.Fatal(err)
			}
		}
	}
}

// versionsInvalidate is the median time, in ms, of invalidating a tag by
// tag versions: one INCR of its version key, whatever its entries.
func versionsInvalidate(ctx context.Context, client valkey.Client) float64 {
	var took []float64
	for range 101 {
		start := time.Now()
		if err := client.Do(ctx, client.B().Incr().Key("bench:tagversion:size").Build()).Error(); err != nil {
			log.Fatal(err)
		}
		took = append(took, ms(time.Since(start)))
	}
	return median(took)
}

// tagReads returns the hits/s, each from 16 goroutines in three alternated
// rounds, of writethrough's Get of an untagged value, of a value of 1 tag
// and of 10 tags (the GET, then one HGET per tag), and of a read that
// checks 10 tag versions the way tag versions would (the GET, then one GET
// per tag).
func tagReads(ctx context.Context, client valkey.Client) (untagged, tagged1, tagged10, versions10 []float64) {
	const workers, each = 16, 10_000
	tags := func(n int) func(product) []string {
		return func(product) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = "product:" + strconv.Itoa(i)
			}
			return out
		}
	}
	fill := func(c *writethrough.Cache[product], key string) {
		for range 2 { // the tags' first fill makes them, and is not stored
			if _, err := c.Get(ctx, key, func(context.Context) (product, error) {
				return product{ID: "42", Name: "Walking boots", Price: 8999}, nil
			}); err != nil {
				log.Fatal(err)
			}
		}
	}
	plain := writethrough.New[product](client, writethrough.Options[product]{})
	one := writethrough.New[product](client, writethrough.Options[product]{TagPrefix: "bench:tag:", TagsOf: tags(1)})
	ten := writethrough.New[product](client, writethrough.Options[product]{TagPrefix: "bench:tag:", TagsOf: tags(10)})
	fill(plain, "bench:get:untagged")
	fill(one, "bench:get:tagged1")
	fill(ten, "bench:get:tagged10")
	versions := make(valkey.Commands, 10)
	for i := range versions {
		versions[i] = client.B().Get().Key("bench:tagversion:" + strconv.Itoa(i)).Build().Pin()
	}
	miss := func(context.Context) (product, error) { return product{}, errors.New("a hit was expected") }
	get := func(c *writethrough.Cache[product], key string) func() error {
		return func() error { _, err := c.Get(ctx, key, miss); return err }
	}
	for range 3 {
		untagged = append(untagged, opsPerSec(workers, each, get(plain, "bench:get:untagged")))
		tagged1 = append(tagged1, opsPerSec(workers, each, get(one, "bench:get:tagged1")))
		tagged10 = append(tagged10, opsPerSec(workers, each, get(ten, "bench:get:tagged10")))
		versions10 = append(versions10, opsPerSec(workers, each, func() error {
			if err := client.Do(ctx, client.B().Get().Key("bench:get:untagged").Build()).Error(); err != nil {
				return err
			}
			for _, r := range client.DoMulti(ctx, versions...) {
				if err := r.Error(); err != nil && !valkey.IsValkeyNil(err) {
					return err
				}
			}
			return nil
		}))
	}
	return untagged, tagged1, tagged10, versions10
}

// clockCeiling is the tag clock's readings a second, and INCRs a second of
// one key, from 32 connections' pipelines of 50, 2 s each, three rounds
// alternated.
func clockCeiling(ctx context.Context, client valkey.Client) (ticks, incrs []float64) {
	clocks := make([]string, 50)
	for i := range clocks {
		clocks[i] = tagset.Clock("bench:clock:")
	}
	tick := func() []valkey.ValkeyResult { return tagset.Tick.Each(ctx, client, clocks, tagset.NoArgs) }
	incr := func() []valkey.ValkeyResult {
		cmds := make(valkey.Commands, len(clocks))
		for i := range cmds {
			cmds[i] = client.B().Incr().Key("bench:clock:incr").Build()
		}
		return client.DoMulti(ctx, cmds...)
	}
	rate := func(pipeline func() []valkey.ValkeyResult) float64 {
		var n atomic.Int64
		deadline := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					for _, r := range pipeline() {
						if err := r.Error(); err != nil {
							log.Fatalf("tag clock: %v", err)
						}
						n.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / 2
	}
	for range 3 {
		ticks, incrs = append(ticks, rate(tick)), append(incrs, rate(incr))
	}
	return ticks, incrs
}
