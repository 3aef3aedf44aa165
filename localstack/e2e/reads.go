package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invalidator-go/invalidator/writethrough"
)

// errLoader marks the error of a writethrough reader's own loader (the
// source did not answer): not the cache's doing.
var errLoader = errors.New("e2e: the loader failed")

// wtReads are the reads through writethrough.Get (the cache:*, replica:*
// and list readers): when each began and how long it took, how many failed
// other than by their loader, and were shed (ErrOverloaded); and when each
// kind of reader loaded from the source.
type wtReads struct {
	mu     sync.Mutex
	at     []time.Time
	took   []time.Duration
	loads  map[string][]time.Time // by kind
	errors atomic.Int64
	shed   atomic.Int64
	first  []string // the first errors, to say what failed
}

// The kinds of writethrough readers, for their loads.
const (
	kindPlain        = "writethrough"   // Get alone
	kindNear         = "near"           // through a local tier
	kindStaleIfError = "stale_if_error" // through a local tier with StaleIfError
	kindReplica      = "replica"
	kindList         = "list"
)

// readThrough reads key through c, as a service would, and notes the read
// in r, and its load as one of kind's.
func readThrough[V any](ctx context.Context, r *wtReads, kind string, c *writethrough.Cache[V], key string, load func(context.Context) (V, error)) error {
	start := time.Now()
	var loading atomic.Bool
	_, err := c.Get(ctx, key, func(ctx context.Context) (V, error) {
		r.loaded(kind)
		loading.Store(true)
		defer loading.Store(false)
		it, err := load(ctx)
		if err != nil {
			err = fmt.Errorf("%w: %w", errLoader, err)
		}
		return it, err
	})
	if errors.Is(ctx.Err(), context.Canceled) {
		return err // the readers are stopping
	}
	if errors.Is(err, context.DeadlineExceeded) && loading.Load() {
		err = fmt.Errorf("%w: the deadline came during the load: %w", errLoader, err) // the source's slowness
	}
	if errors.Is(err, writethrough.ErrOverloaded) {
		r.shed.Add(1)
		err = nil
	}
	r.mu.Lock()
	r.at, r.took = append(r.at, start), append(r.took, time.Since(start))
	if err != nil && !errors.Is(err, errLoader) {
		r.errors.Add(1)
		if len(r.first) < 3 {
			r.first = append(r.first, fmt.Sprintf("%s after %v: %v", key, time.Since(start).Round(time.Millisecond), err))
		}
	}
	r.mu.Unlock()
	return err
}

// loaded notes a load of kind's.
func (r *wtReads) loaded(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loads == nil {
		r.loads = map[string][]time.Time{}
	}
	r.loads[kind] = append(r.loads[kind], time.Now())
}

// report prints the p99 latency of the reads that began during each fault
// and outside them all, and the reads that failed; it tells whether none
// did.
func (r *wtReads) report(line func(name string, v any), faults []faultResult) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	during := make([][]time.Duration, len(faults))
	var outside []time.Duration
	for i, at := range r.at {
		in := false
		for j, f := range faults {
			if !at.Before(f.from) && at.Before(f.to) {
				during[j], in = append(during[j], r.took[i]), true
			}
		}
		if !in {
			outside = append(outside, r.took[i])
		}
	}
	for j, f := range faults {
		line("read_p99_ms_writethrough_"+f.name, percentile(during[j], 0.99).Milliseconds())
	}
	line("read_p99_ms_writethrough_no_fault", percentile(outside, 0.99).Milliseconds())
	line("read_errors_writethrough", r.errors.Load())
	line("read_shed_writethrough", r.shed.Load())
	for _, e := range r.first {
		fmt.Println("  read error: " + e)
	}
	return r.printLoads(line, faults) && r.errors.Load() == 0
}

// printLoads prints each kind of reader's loads a second before the long
// outage (the steady time before it) and during it, and tells whether the
// StaleIfError readers made at most twice as many during it; r.mu is held.
func (r *wtReads) printLoads(line func(name string, v any), faults []faultResult) bool {
	ok := true
	for _, f := range faults {
		if f.name != "cache-down" {
			continue
		}
		for _, kind := range slices.Sorted(maps.Keys(r.loads)) {
			before, during := rate(r.loads[kind], f.quiet, f.from), rate(r.loads[kind], f.from, f.to)
			line("loads_per_s_before_"+kind, fmt.Sprintf("%.2f", before))
			line("loads_per_s_outage_"+kind, fmt.Sprintf("%.2f", during))
			if kind == kindStaleIfError && during > 2*before {
				ok = false
				fmt.Printf("  the StaleIfError readers loaded %.2f/s during the outage, %.2f/s before: over twice as many\n", during, before)
			}
		}
	}
	return ok
}

// rate is how many of at fall in [from, to), a second.
func rate(at []time.Time, from, to time.Time) float64 {
	n := 0
	for _, t := range at {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}
