package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/cacheerr"
	"github.com/invalidator-go/invalidator/internal/fleetbudget"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/endpoint"
)

// The fleet's budget measured: fleetProcesses Invalidators in this process
// — cheap processes, each with its own client, pacer and tag to page —, one
// more sending a first delete every 100 ms, and a service reading, all on
// the shard behind the endpoint, which counts the ECPUs as the cache would
// and throttles above fleetCacheMax. Once with the budget shared, once with
// each process asking its share alone, as every process did before the
// fleet's budget.
const (
	fleetProcesses = 120               // template.yaml's default WorkerMaxProcesses
	fleetCacheMax  = 5000              // template.yaml's default CacheMaxECPUPerSecond
	fleetShare     = fleetCacheMax / 4 // CacheWorkerECPUShare's 25 %
	fleetEntries   = 2000              // each tag: more than a process pages in a run, whatever the tag's size
	fleetReadEvery = 10 * time.Millisecond
	fleetWindow    = 10 * time.Second
)

// fleetRun is what one run saw.
type fleetRun struct {
	shared, reserve bool
	most            float64 // ECPUs a second over the busiest 10 s, counted at the endpoint, the reads' taken out
	reads, refused  int64   // the service's reads, and those the cache refused
	firsts          []time.Duration
	firstsFailed    int64
	tagsDone        int64
	takes           int64
	granted         float64
	steadyTakes     int64 // takes after the first fleetWindow: every process joined the line once by then
	steadyGranted   float64
	endpointRefused int
}

// measureFleet runs the fleet for p.fleet: shared; with p.fleetReferences
// also unshared, as every process asked before the fleet's budget, and
// shared with first deletes in the line as the rest are, without their
// reserve.
func measureFleet(ctx context.Context, env env, s *stack, p plan) ([]fleetRun, error) {
	if s.shard == nil {
		return nil, errors.New("no endpoint to count at: CACHE_REPLICAS is unset")
	}
	admin, err := elasticache.New(env.cache)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	owned, err := slotsOf(ctx, admin, env.endpoint)
	if err != nil {
		return nil, err
	}
	f := &fleet{env: env, e: s.shard.endpoint, admin: admin}
	if err := f.hashtags(ctx, owned); err != nil {
		return nil, err
	}
	var runs []fleetRun
	kinds := []struct{ on, reserve bool }{{true, true}}
	if p.fleetReferences {
		kinds = []struct{ on, reserve bool }{{false, true}, {true, true}, {true, false}}
	}
	for _, shared := range kinds {
		r, err := f.run(ctx, shared.on, shared.reserve, p.fleet)
		if err != nil {
			return runs, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

type fleet struct {
	env   env
	e     *endpoint.Endpoint
	admin valkey.Client
	tags  []string // hash tags of the shard's slots, {f12} and so on
	runs  int
}

// hashtags finds 500 hash tags whose slots the shard serves: keys spread
// over them are sent as the worker sends any keys, in a command a slot.
func (f *fleet) hashtags(ctx context.Context, owned func(int64) bool) error {
	for lo := 0; len(f.tags) < 500; lo += 1000 {
		cmds := make(valkey.Commands, 1000)
		for i := range cmds {
			cmds[i] = f.admin.B().ClusterKeyslot().Key("{f" + strconv.Itoa(lo+i) + "}").Build()
		}
		for i, r := range f.admin.DoMulti(ctx, cmds...) {
			slot, err := r.AsInt64()
			if err != nil {
				return err
			}
			if owned(slot) {
				f.tags = append(f.tags, "{f"+strconv.Itoa(lo+i)+"}")
			}
		}
	}
	return nil
}

func (f *fleet) key(what string, n int) string {
	return "cache:fleet:" + f.tags[n%len(f.tags)] + ":" + what + ":" + strconv.Itoa(n)
}

// tag registers entries keys in the tag name, whose key is in one of the
// shard's slots, and returns the tag.
func (f *fleet) tag(ctx context.Context, rules *invalidate.Rules, name string, n int, entries int) (string, error) {
	tag := f.tags[n%len(f.tags)] + name
	key := rules.TagKey(tag)
	reg := tagset.Registration(1, time.Now().Add(time.Hour))
	for lo := 0; lo < entries; lo += 500 {
		cmds := make(valkey.Commands, 0, 501)
		hset := f.admin.B().Hset().Key(key).FieldValue()
		for i := lo; i < min(lo+500, entries); i++ {
			k := f.key(name, i)
			cmds = append(cmds, f.admin.B().Set().Key(k).Value("cached").Px(time.Hour).Build())
			hset = hset.FieldValue(k, reg)
		}
		for _, r := range f.admin.DoMulti(ctx, append(cmds, hset.Build())...) {
			if err := r.Error(); err != nil {
				return "", err
			}
		}
	}
	return tag, nil
}

// countedBudget counts the takes of a budget and what they granted.
type countedBudget struct {
	invalidate.Budget
	takes   atomic.Int64
	granted atomic.Int64 // thousandths
}

func (b *countedBudget) Take(ctx context.Context, want float64, first bool, place int64) (float64, time.Duration, int64, error) {
	got, wait, next, err := b.Budget.Take(ctx, want, first, place)
	b.takes.Add(1)
	b.granted.Add(int64(got * 1000))
	return got, wait, next, err
}

// noReserve is the fleet's budget without the first deletes' reserve:
// they wait their turn beyond Ahead.
type noReserve struct {
	client valkey.Client
	budget *fleetbudget.Budget
}

func (b noReserve) Take(ctx context.Context, want float64, first bool, place int64) (float64, time.Duration, int64, error) {
	return b.budget.Take(ctx, b.client, want, first, place, 0)
}

func (f *fleet) run(ctx context.Context, shared, reserve bool, d time.Duration) (fleetRun, error) {
	f.runs++
	r := fleetRun{shared: shared, reserve: reserve}
	run := "r" + strconv.Itoa(f.runs)
	rules, err := invalidate.NewRules(invalidate.RulesConfig{TagPrefix: "cache:fleet:tag:", AllowedKeys: []string{"cache:fleet:*"}})
	if err != nil {
		return r, err
	}
	worker := f.env.cache
	worker.Username, worker.Password = f.env.workerUser, os.Getenv("WORKER_PASSWORD")
	var budget *countedBudget
	clients := make([]valkey.Client, fleetProcesses+1)
	invs := make([]*invalidate.Invalidator, len(clients))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range clients {
		if clients[i], err = elasticache.New(worker); err != nil {
			return r, err
		}
		opts := invalidate.Options{Rules: rules, ECPUPerSecond: fleetShare}
		if shared {
			if budget == nil {
				budget = &countedBudget{Budget: invalidate.ValkeyBudget(clients[i], fleetShare)}
			}
			opts.Fleet, opts.FallbackECPUPerSecond = budget, fleetShare/fleetProcesses
			if i == fleetProcesses && !reserve {
				opts.Fleet = noReserve{clients[i], fleetbudget.New(fleetShare)}
			}
		}
		invs[i] = invalidate.New(invalidate.Valkey(clients[i]), opts)
	}
	tags := make([]string, fleetProcesses)
	for i := range tags {
		if tags[i], err = f.tag(ctx, rules, run+"p"+strconv.Itoa(i), i, fleetEntries); err != nil {
			return r, fmt.Errorf("registering the fleet's tags: %w", err)
		}
	}

	// A fresh budget, as a fleet finds one idle for fleetbudget.Queue: no
	// line left by the last run's processes.
	for _, key := range fleetbudget.Keys(fleetShare) {
		if err := f.admin.Do(ctx, f.admin.B().Del().Key(key).Build()).Error(); err != nil {
			return r, err
		}
	}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	throttled := make(chan int, 1)
	go func() { throttled <- f.e.Throttle(fleetCacheMax, d) }()
	for i, tag := range tags {
		wg.Go(func() {
			for runCtx.Err() == nil {
				rep := invs[i].Invalidate(runCtx, invalidate.Decoded([]invalidate.Record{{ID: tag, Changes: []events.Change{{Tags: []string{tag}}}}}))
				if rep.Results[0].Err == nil {
					atomic.AddInt64(&r.tagsDone, 1)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			rep := invs[fleetProcesses].Invalidate(runCtx, invalidate.Decoded([]invalidate.Record{{ID: "first", Changes: []events.Change{{Keys: []string{f.key(run+"first", n)}}}}}))
			if runCtx.Err() != nil {
				return
			}
			if rep.Results[0].Err != nil {
				atomic.AddInt64(&r.firstsFailed, 1)
				continue
			}
			mu.Lock()
			r.firsts = append(r.firsts, time.Since(start))
			mu.Unlock()
		}
	})
	wg.Go(func() {
		for n := 0; runCtx.Err() == nil; n++ {
			err := f.admin.Do(runCtx, f.admin.B().Get().Key(f.key(run+"read", n)).Build()).Error()
			if runCtx.Err() != nil {
				return
			}
			atomic.AddInt64(&r.reads, 1)
			if cacheerr.Throttled(err) {
				atomic.AddInt64(&r.refused, 1)
			}
			time.Sleep(fleetReadEvery)
		}
	})
	// Each second: the ECPUs counted, less the reads' (a GET of nothing:
	// one each).
	var counted []float64
	tick := time.NewTicker(time.Second)
	var joined struct {
		takes   int64
		granted float64
	}
	for last, lastReads := f.e.Metered(), int64(0); runCtx.Err() == nil; {
		<-tick.C
		now, reads := f.e.Metered(), atomic.LoadInt64(&r.reads)
		counted = append(counted, now-last-float64(reads-lastReads))
		last, lastReads = now, reads
		if budget != nil && len(counted) == int(fleetWindow/time.Second) {
			joined.takes, joined.granted = budget.takes.Load(), float64(budget.granted.Load())/1000
		}
	}
	tick.Stop()
	wg.Wait()
	r.endpointRefused = <-throttled
	for i := 0; i+int(fleetWindow/time.Second) <= len(counted); i++ {
		var sum float64
		for _, c := range counted[i : i+int(fleetWindow/time.Second)] {
			sum += c
		}
		r.most = max(r.most, sum/fleetWindow.Seconds())
	}
	if budget != nil {
		r.takes, r.granted = budget.takes.Load(), float64(budget.granted.Load())/1000
		r.steadyTakes, r.steadyGranted = r.takes-joined.takes, r.granted-joined.granted
	}
	return r, nil
}

// print writes the runs' lines and checks the shared one: within 1.1 ×
// the share (1.25 × on a busy machine's run), no read refused, first
// deletes within lim.
func printFleet(runs []fleetRun, line func(string, any), g *gates, lim limits) {
	if len(runs) == 0 {
		return
	}
	line("fleet_processes", fleetProcesses)
	for _, r := range runs {
		name := "fleet_" + map[bool]string{true: "shared", false: "unshared"}[r.shared] + "_"
		if !r.reserve {
			line("fleet_shared_no_reserve_first_delete_p99_ms", percentile(r.firsts, 0.99).Milliseconds())
			continue
		}
		p99 := percentile(r.firsts, 0.99)
		line(name+"ecpus_per_s_busiest_10s_vs_share", fmt.Sprintf("%.3f", r.most/fleetShare))
		line(name+"reads_refused", r.refused)
		line(name+"reads", r.reads)
		line(name+"first_delete_p99_ms", p99.Milliseconds())
		line(name+"first_deletes_failed", r.firstsFailed)
		line(name+"tags_done", r.tagsDone)
		line(name+"endpoint_refused", r.endpointRefused)
		if !r.shared {
			continue
		}
		line(name+"takes_per_ecpu_granted", fmt.Sprintf("%.4f", float64(r.takes)/max(r.granted, 1)))
		// Past the burst's first 10 s, in which each process joins the
		// line once whatever the budget's design: what a long burst costs
		// (a fleet of 100,000-entry tags pages for hours).
		steady := float64(r.steadyTakes) / max(r.steadyGranted, 1)
		line(name+"takes_per_ecpu_granted_after_10s", fmt.Sprintf("%.4f", steady))
		bound := map[bool]float64{true: 1.1, false: 1.25}[lim == goals]
		g.check("the fleet's ECPUs a second over its busiest 10 s, ÷ its share", fmt.Sprintf("%.3f", r.most/fleetShare), fmt.Sprintf("≤ %g", bound), r.most <= bound*fleetShare)
		g.check("the services' reads refused while the fleet pages tags", r.refused, "= 0", r.refused == 0)
		if lim == goals { // a 20 s run (e2e-short) has 10 s past the joins: reported
			g.check("the fleet budget's takes ÷ the ECPUs they grant, past the first 10 s", fmt.Sprintf("%.4f", steady), "≤ 0.01", steady <= 0.01)
		}
		g.check("first deletes failed while the fleet pages tags", r.firstsFailed, "= 0", r.firstsFailed == 0)
		g.check("first-delete lag p99 while the fleet pages tags", fmt.Sprintf("%d ms", p99.Milliseconds()), fmt.Sprintf("≤ %d ms", lim.fleetFirst.Milliseconds()), p99 <= lim.fleetFirst)
	}
}
