package main

import (
	"context"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// The template's defaults: CacheMaxECPUPerSecond, CacheWorkerECPUShare.
const (
	defaultCacheECPUs  = 5000
	defaultWorkerShare = 25
	defaultBudget      = defaultCacheECPUs * defaultWorkerShare / 100
)

// budgetGroup measures the worker's cache budget: the ECPUs the model
// gives a change and a tag of 100,000 entries, that tag's invalidation
// under the template's default budget — its time against its ECPUs ÷
// budget, the services' reads meanwhile against idle, unpaced for
// reference — and the model's bytes against what the server counted on
// the worker's connections (CLIENT LIST tot-net-in, tot-net-out).
func budgetGroup(ctx context.Context, s server) {
	rules, err := invalidate.NewRules(invalidate.RulesConfig{Default: []string{"bench:{entity}:{id}"}, TagPrefix: "bench:tag:", AllowedKeys: []string{"bench:*"}})
	if err != nil {
		log.Fatal(err)
	}
	worker := namedClient(s, "bench-budget")
	defer worker.Close()
	records := make([]invalidate.Record, 1000)
	for i := range records {
		records[i] = invalidate.Record{ID: strconv.Itoa(i), Changes: []events.Change{{Entity: "product", ID: strconv.Itoa(i)}}}
	}
	rep := invalidate.New(invalidate.Valkey(worker), invalidate.Options{Rules: rules}).Invalidate(ctx, invalidate.Decoded(records))
	print("ecpus_per_change", float64(rep.Metrics.ECPUs)/float64(len(records)))

	const n = 100_000
	paced := invalidate.New(invalidate.Valkey(worker), invalidate.Options{Rules: rules, ECPUPerSecond: defaultBudget})
	register(ctx, s.client, rules.TagKey("budget"), "bench:budget:", n)
	before := connStats(ctx, s.client, "bench-budget")
	var took time.Duration
	idle, busy := readsDuring(ctx, s.client, func() {
		start := time.Now()
		rep = paced.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{{ID: "budget", Changes: []events.Change{{Tags: []string{"budget"}}}}}))
		took = time.Since(start)
	})
	after := connStats(ctx, s.client, "bench-budget")
	if err := rep.Results[0].Err; err != nil || rep.Metrics.TagEntriesDeleted != n {
		log.Fatalf("budget: tag of %d: %v, %d entries deleted", n, err, rep.Metrics.TagEntriesDeleted)
	}
	modelled := float64(rep.Metrics.ECPUs) / defaultBudget
	print("tag_100k_ecpus", float64(rep.Metrics.ECPUs))
	print("tag_100k_paced_s", took.Seconds())
	print("tag_100k_paced_over_model_s", took.Seconds()-modelled)
	log.Printf("budget: read p99 %.3f ms idle, %.3f ms during the paced tag", idle, busy)
	print("tag_100k_read_p99_vs_idle", busy/idle)
	print("ecpu_model_bytes_vs_server", float64(rep.Metrics.Bytes)/float64(after.bytes-before.bytes))
	print("tag_scripts_usec_per_entry", float64(after.scriptUsec-before.scriptUsec)/n)

	unpaced := invalidate.New(invalidate.Valkey(worker), invalidate.Options{Rules: rules})
	register(ctx, s.client, rules.TagKey("unpaced"), "bench:unpaced:", n)
	idle, busy = readsDuring(ctx, s.client, func() {
		unpaced.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{{ID: "unpaced", Changes: []events.Change{{Tags: []string{"unpaced"}}}}}))
	})
	print("tag_100k_read_p99_vs_idle_unpaced", busy/idle)

	pacer, limiter := pacingVsRate(ctx, s, rules)
	print("first_delete_behind_tag_ms_pacer", pacer)
	print("first_delete_behind_tag_ms_x_time_rate", limiter)
}

// namedClient is a client of its own to the bench's server, named for
// CLIENT LIST.
func namedClient(s server, name string) valkey.Client {
	opt, err := s.cfg.ClientOption()
	if err != nil {
		log.Fatal(err)
	}
	opt.ClientName = name
	client, err := valkey.NewClient(opt)
	if err != nil {
		log.Fatal(err)
	}
	return client
}

// stats are what the server counted: the bytes of a client's
// connections, and the time its scripts took.
type stats struct{ bytes, scriptUsec int64 }

// connStats sums tot-net-in and tot-net-out over the server's connections
// named name, and reads the scripts' time (INFO commandstats, usec).
func connStats(ctx context.Context, client valkey.Client, name string) (s stats) {
	info, err := client.Do(ctx, client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		log.Fatal(err)
	}
	for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
		if _, line, ok := strings.Cut(info, cmd); ok {
			_, usec, _ := strings.Cut(line, "usec=")
			usec, _, _ = strings.Cut(usec, ",")
			n, _ := strconv.ParseInt(usec, 10, 64)
			s.scriptUsec += n
		}
	}
	list, err := client.Do(ctx, client.B().ClientList().Build()).ToString()
	if err != nil {
		log.Fatal(err)
	}
	for line := range strings.Lines(list) {
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		for field := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			if k == "tot-net-in" || k == "tot-net-out" {
				s.bytes += n
			}
		}
	}
	return s
}

// readsDuring returns the p99 of the services' reads — 4 readers, each a
// GET a millisecond — over 3 idle seconds, then while fn runs, in ms.
func readsDuring(ctx context.Context, client valkey.Client, fn func()) (idle, busy float64) {
	if err := client.Do(ctx, client.B().Set().Key("bench:budget:read").Value("cached").Build()).Error(); err != nil {
		log.Fatal(err)
	}
	read := func(until func() bool) float64 {
		var mu sync.Mutex
		var took []float64
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !until() {
					start := time.Now()
					if err := client.Do(ctx, client.B().Get().Key("bench:budget:read").Build()).Error(); err != nil {
						log.Fatal(err)
					}
					d := ms(time.Since(start))
					mu.Lock()
					took = append(took, d)
					mu.Unlock()
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		slices.Sort(took)
		return took[len(took)*99/100]
	}
	end := time.Now().Add(3 * time.Second)
	idle = read(func() bool { return time.Now().After(end) })
	var done sync.WaitGroup
	var finished sync.Mutex
	over := false
	done.Go(func() {
		fn()
		finished.Lock()
		over = true
		finished.Unlock()
	})
	busy = read(func() bool { finished.Lock(); defer finished.Unlock(); return over })
	done.Wait()
	return idle, busy
}
