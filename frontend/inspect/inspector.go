package inspect

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// A Source reads changes as a second consumer of the worker's events.
type Source interface {
	// Read calls emit with each record's changes, or why it did not decode,
	// until ctx ends.
	Read(ctx context.Context, emit func(changes []events.Change, err error)) error
}

// Options tune an Inspector.
type Options struct {
	// Sample is the share of changes checked. Default 1: every change.
	Sample float64
	// Delays are when each sampled change's keys are checked, after the
	// inspector read it (a poll interval at most after the worker could
	// have). Default 1 s and 10 s.
	Delays []time.Duration
	// VersionPath locates the version in plain JSON values (["version"]);
	// writethrough entries carry theirs. Values with no version to compare
	// are counted unverified.
	VersionPath []string
	// ItemVersion names the number attribute of a stream record's new image
	// that holds the item's version. Default "version".
	ItemVersion string
	// Timeout bounds one check's reads: a key the cache does not give
	// within it counts unreadable, not late. Default 1 s.
	Timeout time.Duration
	// Parallel bounds the checks in flight. Default 32.
	Parallel int
	// Findings bounds the inconsistent keys the report lists. Default 100.
	Findings int
}

func (o *Options) defaults() {
	if o.Sample <= 0 || o.Sample > 1 {
		o.Sample = 1
	}
	if len(o.Delays) == 0 {
		o.Delays = []time.Duration{time.Second, 10 * time.Second}
	}
	if o.ItemVersion == "" {
		o.ItemVersion = "version"
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 32
	}
	if o.Findings <= 0 {
		o.Findings = 100
	}
}

// Inspector checks sampled changes' keys at fixed delays.
type Inspector struct {
	cache Cache
	rules *invalidate.Rules
	opts  Options

	mu  sync.Mutex
	rep Report
}

// New returns an Inspector that plans keys with rules and reads them from
// cache.
func New(cache Cache, rules *invalidate.Rules, opts Options) *Inspector {
	opts.defaults()
	in := &Inspector{cache: cache, rules: rules, opts: opts}
	for _, d := range opts.Delays {
		in.rep.Delays = append(in.rep.Delays, DelayReport{After: d})
	}
	return in
}

// check is one sampled change, due at each delay after it was read.
type check struct {
	read    time.Time
	keys    []string
	entity  string
	id      string
	want    int64
	hasWant bool
}

// Run reads the sources until read ends, then finishes the checks already
// scheduled unless checks ends first. It returns the report and the first
// error of a source.
func (in *Inspector) Run(read, checks context.Context, sources ...Source) (Report, error) {
	queues := make([]chan check, len(in.opts.Delays))
	var checkers sync.WaitGroup
	sem := make(chan struct{}, in.opts.Parallel)
	for i := range queues {
		// Changes are read in order, so each delay's checks fall due in
		// the order they are queued.
		queues[i] = make(chan check, 1<<16)
		checkers.Go(func() { in.checkAt(checks, i, queues[i], sem) })
	}
	var readers sync.WaitGroup
	errs := make(chan error, len(sources))
	for _, s := range sources {
		readers.Go(func() {
			if err := s.Read(read, func(changes []events.Change, err error) { in.take(changes, err, queues) }); err != nil && read.Err() == nil {
				errs <- err
			}
		})
	}
	readers.Wait()
	for _, q := range queues {
		close(q)
	}
	checkers.Wait()
	close(errs)
	return in.Snapshot(), <-errs
}

// take counts one record read, and queues checks for its sampled changes.
func (in *Inspector) take(changes []events.Change, err error, queues []chan check) {
	now := time.Now()
	var picked []check
	in.mu.Lock()
	in.rep.Records++
	if err != nil {
		in.rep.Undecodable++
	}
	for i := range changes {
		in.rep.Changes++
		if rand.Float64() >= in.opts.Sample {
			continue
		}
		in.rep.Sampled++
		keys, err := in.rules.Keys(&changes[i], nil)
		if err != nil || len(keys) == 0 {
			in.rep.Unplanned++
			continue
		}
		c := check{read: now, keys: keys, entity: changes[i].Entity, id: changes[i].ID}
		c.want, c.hasWant = in.version(&changes[i])
		picked = append(picked, c)
	}
	in.mu.Unlock()
	for _, c := range picked {
		for _, q := range queues {
			q <- c
		}
	}
}

// version is the change's version: its own, or its stream item's.
func (in *Inspector) version(c *events.Change) (int64, bool) {
	if c.HasVersion {
		return c.Version, true
	}
	av, ok := c.NewImage[in.opts.ItemVersion]
	if !ok || av.Type != events.TypeNumber {
		return 0, false
	}
	n, err := strconv.ParseInt(av.S, 10, 64)
	return n, err == nil
}

// checkAt runs the checks of the i-th delay as they fall due.
func (in *Inspector) checkAt(ctx context.Context, i int, queue <-chan check, sem chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	after := in.opts.Delays[i]
	for c := range queue {
		if wait := time.Until(c.read.Add(after)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-sem }()
			in.checkOne(ctx, i, c)
		})
	}
}

func (in *Inspector) checkOne(ctx context.Context, i int, c check) {
	ctx, cancel := context.WithTimeout(ctx, in.opts.Timeout)
	reads := in.cache.Get(ctx, c.keys)
	cancel()
	at := time.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	d := &in.rep.Delays[i]
	for k, r := range reads {
		d.Keys++
		if r.Err != nil {
			d.Unreadable++
			continue
		}
		v, found := judge(r.Value, r.Present, c.want, c.hasWant, in.opts.VersionPath)
		switch v {
		case Consistent:
			d.Consistent++
		case Inconsistent:
			d.Inconsistent++
			if len(in.rep.Inconsistent) < in.opts.Findings {
				in.rep.Inconsistent = append(in.rep.Inconsistent, Finding{Key: c.keys[k], After: d.After, At: at, Found: found, Want: c.want, Entity: c.entity, ID: c.id})
			}
		case Unverified:
			d.Unverified++
		}
	}
}

// Snapshot is the report so far.
func (in *Inspector) Snapshot() Report {
	in.mu.Lock()
	defer in.mu.Unlock()
	rep := in.rep
	rep.Delays = append([]DelayReport(nil), rep.Delays...)
	rep.Inconsistent = append([]Finding(nil), rep.Inconsistent...)
	return rep
}
