package inspect

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/invalidate"
)

// A Source reads changes as a second consumer of the worker's events.
type Source interface {
	// Read calls emit with each record's changes, or why it did not decode,
	// until ctx ends. It returns an error when it cannot read at all (the
	// run then stops); later failures it retries, and tells failed.
	Read(ctx context.Context, emit func(changes []events.Change, err error), failed func(error)) error
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
	// Late is how long after it falls due a check counts as late (the
	// report says how many were). Default 1 s.
	Late time.Duration
	// Parallel bounds the checks in flight at each delay. Default 32.
	Parallel int
	// Findings bounds the inconsistent keys the report lists at each
	// delay. Default 100.
	Findings int
	// TagEntries bounds the entries of each tag of a change that a check
	// reads. Default 100.
	TagEntries int
}

func (o *Options) defaults() {
	if !(o.Sample > 0 && o.Sample <= 1) { // NaN too
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
	if o.Late <= 0 {
		o.Late = time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 32
	}
	if o.Findings <= 0 {
		o.Findings = 100
	}
	if o.TagEntries <= 0 {
		o.TagEntries = 100
	}
}

// Inspector checks sampled changes' keys at fixed delays.
type Inspector struct {
	cache Cache
	rules *invalidate.Rules
	opts  Options

	send sync.Mutex // orders the checks queued, for each delay's FIFO
	mu   sync.Mutex // guards rep and seen
	rep  Report
	seen seen
}

// New returns an Inspector that plans keys with rules and reads them from
// cache.
func New(cache Cache, rules *invalidate.Rules, opts Options) *Inspector {
	opts.defaults()
	in := &Inspector{cache: cache, rules: rules, opts: opts}
	in.seen.horizon = slices.Max(opts.Delays) + opts.Late + time.Minute
	for _, d := range opts.Delays {
		in.rep.Delays = append(in.rep.Delays, DelayReport{After: d})
	}
	return in
}

// check is one sampled change, due at each delay after it was read.
type check struct {
	read    time.Time
	at      time.Time // when the change was made: its occurredAt, else read
	keys    []string
	tags    []string // the keys of its tags
	entity  string
	id      string
	deleted bool
	want    int64
	hasWant bool
}

// Run reads the sources until read ends, then finishes the checks already
// scheduled unless checks ends first. A source that cannot read at all
// stops the run, checks and all: Run returns the report so far and its
// error.
func (in *Inspector) Run(read, checks context.Context, sources ...Source) (Report, error) {
	read, stopReading := context.WithCancelCause(read)
	defer stopReading(nil)
	checks, stopChecks := context.WithCancel(checks)
	defer stopChecks()
	stop := func(err error) { stopReading(err); stopChecks() }
	queues := make([]chan check, len(in.opts.Delays))
	var checkers sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan check, 1<<16)
		checkers.Go(func() { in.checkAt(checks, i, queues[i]) })
	}
	var readers sync.WaitGroup
	emit := func(changes []events.Change, err error) { in.take(read, changes, err, queues) }
	failed := func(err error) {
		in.mu.Lock()
		defer in.mu.Unlock()
		in.rep.ReadErrors++
		in.rep.LastReadError = err.Error()
	}
	for _, s := range sources {
		readers.Go(func() {
			if err := s.Read(read, emit, failed); err != nil {
				stop(err)
			}
		})
	}
	readers.Wait()
	for _, q := range queues {
		close(q)
	}
	checkers.Wait()
	err := context.Cause(read)
	if err == context.Canceled || err == context.DeadlineExceeded {
		err = nil // the caller stopped the reading
	}
	return in.Snapshot(), err
}

// take counts one record read, and queues checks for its sampled changes.
// A full queue holds the reader back, until the reading stops.
func (in *Inspector) take(read context.Context, changes []events.Change, err error, queues []chan check) {
	var picked []check
	in.mu.Lock()
	in.rep.Records++
	if err != nil {
		in.rep.Undecodable++
	}
	now := time.Now()
	for i := range changes {
		want, hasWant := in.version(&changes[i])
		if hasWant && changes[i].ID != "" && !in.seen.add(now, identity{changes[i].Entity, changes[i].ID, want, changes[i].Op}) {
			in.rep.Duplicates++
			continue
		}
		in.rep.Changes++
		if rand.Float64() >= in.opts.Sample {
			continue
		}
		in.rep.Sampled++
		// Keys planned for a change that fails its plan are still deleted
		// by the worker, and checked here.
		keys, _ := in.rules.Keys(&changes[i], nil)
		tags := tagsOf(in.rules, &changes[i])
		if len(keys)+len(tags) == 0 {
			in.rep.Unplanned++
			continue
		}
		picked = append(picked, check{keys: keys, tags: tags, at: changes[i].OccurredAt, entity: changes[i].Entity, id: changes[i].ID,
			deleted: changes[i].Op == events.OpDelete, want: want, hasWant: hasWant})
	}
	in.mu.Unlock()
	if len(picked) == 0 {
		return
	}
	// Read times and queue order agree, so that each delay's checks fall
	// due in the order they wait.
	in.send.Lock()
	defer in.send.Unlock()
	now = time.Now()
	for _, c := range picked {
		c.read = now
		if c.at.IsZero() {
			c.at = now
		}
		for _, q := range queues {
			// A check there is room for is queued, the reading over or not
			// (a select of both would drop half of those read at its end):
			// only a full queue waits, until the reading stops.
			select {
			case q <- c:
				continue
			default:
			}
			select {
			case q <- c:
			case <-read.Done():
				return
			}
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

// checkAt runs the checks of the i-th delay as they fall due. Once ctx
// ends it drops what is queued, so that no reader waits on a full queue.
func (in *Inspector) checkAt(ctx context.Context, i int, queue <-chan check) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, in.opts.Parallel)
	after := in.opts.Delays[i]
	for c := range queue {
		due := c.read.Add(after)
		if ctx.Err() != nil || (time.Now().Before(due) && !wait.For(ctx, time.Until(due))) {
			continue
		}
		select {
		case <-ctx.Done():
			continue
		case sem <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-sem }()
			in.checkOne(ctx, i, c, time.Since(due) > in.opts.Late)
		})
	}
}

// checkOne reads a change's keys and counts what they hold; a check cut
// short by the end of the run counts nothing.
func (in *Inspector) checkOne(ctx context.Context, i int, c check, late bool) {
	rctx, cancel := context.WithTimeout(ctx, in.opts.Timeout)
	reads := in.cache.Get(rctx, c.keys)
	keys := slices.Clip(c.keys)
	verdicts := make([]Verdict, len(reads), len(reads)+len(c.tags))
	found := make([]int64, len(reads))
	for k, r := range reads {
		verdicts[k] = Unreadable
		if r.Err == nil {
			verdicts[k], found[k] = judge(r.Value, r.Present, c.deleted, c.want, c.hasWant, in.opts.VersionPath)
		}
	}
	tagOf := make([]string, len(keys), len(keys)+len(c.tags))
	for _, e := range in.tagChecks(rctx, c) {
		keys, reads, verdicts, found, tagOf = append(keys, e.key), append(reads, e.read), append(verdicts, e.verdict), append(found, 0), append(tagOf, e.tag)
	}
	cancel()
	if ctx.Err() != nil {
		return
	}
	at := time.Now()
	absent := 0
	for _, r := range reads {
		if r.Err == nil && !r.Present {
			absent++
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	d := &in.rep.Delays[i]
	d.Keys += len(reads)
	d.Tags += len(c.tags)
	d.Absent += absent
	if late {
		d.Late += len(reads)
	}
	for k, v := range verdicts {
		switch v {
		case Consistent:
			d.Consistent++
		case Inconsistent:
			d.Inconsistent++
			if d.findings < in.opts.Findings {
				d.findings++
				in.rep.Inconsistent = append(in.rep.Inconsistent, Finding{Key: keys[k], Tag: tagOf[k], After: d.After, At: at, Found: found[k], Want: c.want, Entity: c.entity, ID: c.id})
			}
		case Unverified:
			d.Unverified++
		case Unreadable:
			d.Unreadable++
		}
	}
}

// Snapshot is the report so far.
func (in *Inspector) Snapshot() Report {
	in.mu.Lock()
	defer in.mu.Unlock()
	rep := in.rep
	rep.Delays = append([]DelayReport(nil), rep.Delays...)
	rep.Inconsistent = append([]Finding{}, rep.Inconsistent...)
	return rep
}
