package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invalidator-go/invalidator/writethrough"
)

// errLoader marks the error of a writethrough reader's own loader (the
// source did not answer): not the cache's doing.
var errLoader = errors.New("e2e: the loader failed")

// wtReads are the reads through writethrough.Get (the cache:* and replica:*
// readers): when each began and how long it took, and how many failed
// other than by their loader.
type wtReads struct {
	mu     sync.Mutex
	at     []time.Time
	took   []time.Duration
	errors atomic.Int64
	first  []string // the first errors, to say what failed
}

// readThrough reads key through c, as a service would, and notes the read
// in r.
func readThrough[V any](ctx context.Context, r *wtReads, c *writethrough.Cache[V], key string, load func(context.Context) (V, error)) error {
	start := time.Now()
	var loading atomic.Bool
	_, err := c.Get(ctx, key, func(ctx context.Context) (V, error) {
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
	for _, e := range r.first {
		fmt.Println("  read error: " + e)
	}
	return r.errors.Load() == 0
}
