package invalidate

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// Options tune an Invalidator. The zero value gives the defaults.
type Options struct {
	// Rules plan the keys of each change. Default: DefaultRules().
	Rules *Rules
	// Chunk is the number of keys per Cache.Unlink call. Default 500.
	Chunk int
	// Parallel is how many Unlink calls may run at once. Default 8: enough
	// in flight to keep the pipelines to every node full.
	Parallel int
	// AttemptTimeout bounds one Unlink call, so that a node that stopped
	// answering (frozen, or gone without closing its connections) costs
	// one attempt, not the whole deadline. Default 5 s.
	AttemptTimeout time.Duration
	// Backoff is the pause before the first retry of a key that failed for
	// now, doubled for each next one up to MaxBackoff, with jitter. Keys are
	// retried until the context ends or its deadline is too near for the
	// next pause: the cache may be back any moment. Defaults 50 ms and 1 s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// TagPage is how many members of a tag are asked for at a time (the
	// cache may give a few more), deleted, then forgotten. Default 1,000.
	TagPage int
	// ECPUPerSecond is the most ECPUs a second, by the model of ecpu.go,
	// the Invalidator asks of the cache: the first deletes of keys go
	// first, then tags' pages, then second deletes. After a throttling
	// reply it asks less for a while. Default 0: no limit.
	ECPUPerSecond float64
	// Fleet, when set, is a budget that the Invalidator shares with other
	// processes, ECPUPerSecond being the budget's: each ECPU is taken from
	// it first, in chunks. While it cannot be read the Invalidator asks at
	// most FallbackECPUPerSecond, and says so to OnFleetDown (nil error:
	// back). Default none: ECPUPerSecond is this Invalidator's own.
	Fleet       Budget
	OnFleetDown func(error)
	// FallbackECPUPerSecond is the most a second while Fleet cannot be
	// read: the fleet's share divided by its most processes. Default
	// ECPUPerSecond / 100.
	FallbackECPUPerSecond float64
}

func (o *Options) defaults() {
	if o.Rules == nil {
		o.Rules = DefaultRules()
	}
	if o.Chunk <= 0 {
		o.Chunk = 500
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 5 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 50 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Second
	}
	if o.TagPage <= 0 {
		o.TagPage = 1000
	}
}

// Invalidator deletes the cache keys of batches of records, and the entries
// of their tags. It is safe for concurrent use.
type Invalidator struct {
	cache Cache
	opts  Options
	pace  *pacer
}

// New returns an Invalidator deleting from cache, and invalidating tags in
// it.
func New(cache Cache, opts Options) *Invalidator {
	opts.defaults()
	pace := newPacer(opts.ECPUPerSecond, opts.Fleet, opts.FallbackECPUPerSecond)
	if pace != nil && pace.fleet != nil {
		pace.fleet.onDown = opts.OnFleetDown
	}
	return &Invalidator{cache: cache, opts: opts, pace: pace}
}

// batch is the state of one Invalidate call: the distinct keys and, for
// each record, where its keys are among them.
type batch struct {
	keys    []string
	index   map[string]int32
	prio    []priority // each key's: a first delete's if one names it
	status  []KeyStatus
	errs    []error // the last error of each failed key
	recKeys []int32 // the keys of every record, record after record
	recEnd  []int32 // where each record's keys end in recKeys
	planErr []error
	// The distinct tags, what became of each, and where each record's are
	// among them, as for keys.
	tags     []string
	tagIndex map[string]int32
	tagPrio  []priority
	tagOut   []tagOutcome
	// entryBytes counts the keys of the entries the tags' outcomes carry.
	entryBytes atomic.Int64
	recTags    []int32
	recTagEnd  []int32
	// The batch's costs, by the model: ECPUs in thousandths, and bytes;
	// and the commands the cache throttled.
	spent, bytes, throttled atomic.Int64
	reach                   reach // what its records may still plan
}

// decodeChunk is how many records are decoded before their keys are sent:
// the deletes of the first records then overlap the decoding of the rest.
const decodeChunk = 128

// Rules are the rules the Invalidator plans with.
func (inv *Invalidator) Rules() *Rules { return inv.opts.Rules }

// Invalidate decodes a batch, plans its keys and deletes them, and reports
// each record. Large batches are decoded on every CPU, and the keys of each
// decoded chunk of records are sent while the next chunks are decoded. Keys
// that fail for now are retried with backoff until they pass or ctx ends
// (or its deadline is too near for the next pause): give ctx a deadline.
// It returns when every key is settled: deleted, absent, failed for good,
// or failed for now when the time ran out.
func (inv *Invalidator) Invalidate(ctx context.Context, in Batch) Report {
	began := time.Now()
	records := make([]Record, in.Len)
	ready := decodeAll(in, records)
	b := &batch{
		index:     make(map[string]int32, len(records)),
		recEnd:    make([]int32, len(records)),
		planErr:   make([]error, len(records)),
		recTagEnd: make([]int32, len(records)),
		reach:     inv.reach(ctx, in),
	}
	f := inv.flight(ctx, b)
	for lo := 0; lo < len(records); lo += decodeChunk {
		hi := min(lo+decodeChunk, len(records))
		ready(lo / decodeChunk)
		from := len(b.keys)
		inv.plan(b, records, lo, hi)
		for start := from; start < len(b.keys); start += inv.opts.Chunk {
			end := min(start+inv.opts.Chunk, len(b.keys))
			f.send(b.keys[start:end], int32(start), nil, slices.Min(b.prio[start:end]))
		}
	}
	planned := time.Since(began)
	b.status = make([]KeyStatus, len(b.keys))
	b.errs = make([]error, len(b.keys))
	pending := f.settle(b)
	// One window of retries for the batch, its keys' and its tags' at once:
	// a tag on a node that is down adds nothing to the keys' wait.
	retries, cancel := retryWithin(ctx, in.RetryFor)
	defer cancel()
	var keys sync.WaitGroup
	keys.Go(func() { inv.retry(retries, b, pending) })
	inv.invalidateTags(ctx, retries, b)
	keys.Wait()
	rep := inv.report(records, b)
	rep.Metrics.Planned = planned
	return rep
}

// retry sends the keys of b at the indices pending again, with backoff,
// until they pass or ctx, the batch's retries, ends, its deadline too near
// for the next pause.
func (inv *Invalidator) retry(ctx context.Context, b *batch, pending []int32) {
	for attempt := 1; len(pending) > 0 && inv.pause(ctx, attempt); attempt++ {
		f := inv.flight(ctx, b)
		for start := 0; start < len(pending); start += inv.opts.Chunk {
			idx := pending[start:min(start+inv.opts.Chunk, len(pending))]
			keys := make([]string, len(idx))
			prio := secondDeletes
			for i, k := range idx {
				keys[i], prio = b.keys[k], min(prio, b.prio[k])
			}
			f.send(keys, 0, idx, prio)
		}
		pending = f.settle(b)
	}
}

// retryWithin bounds the retries of a batch to d from now, the end of its
// first pass, unless d is 0 or ctx's deadline comes first.
func retryWithin(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// plan adds the keys and tags of records[lo:hi] to the batch: each
// record's whole, within what the batch may still spend (b.reach).
func (inv *Invalidator) plan(b *batch, records []Record, lo, hi int) {
	var keys, tags []string
	var keyPrio, tagPrio []priority
	for r := lo; r < hi; r++ {
		keys, tags, keyPrio, tagPrio = keys[:0], tags[:0], keyPrio[:0], tagPrio[:0]
		// A record that failed to decode may still carry the changes that
		// did decode (one bad element of an array): they are planned too.
		for c := range records[r].Changes {
			prio := firstDeletes
			if records[r].Changes[c].SecondDelete {
				prio = secondDeletes
			}
			var kerr, terr error
			keys, kerr = inv.opts.Rules.Keys(&records[r].Changes[c], keys)
			tags, terr = inv.opts.Rules.Tags(&records[r].Changes[c], tags)
			if err := cmp.Or(kerr, terr); err != nil && b.planErr[r] == nil {
				b.planErr[r] = err
			}
			for len(keyPrio) < len(keys) {
				keyPrio = append(keyPrio, prio)
			}
			for len(tagPrio) < len(tags) {
				tagPrio = append(tagPrio, prio)
			}
		}
		if overCap(b.planErr[r]) {
			keys, tags = keys[:0], tags[:0]
		}
		if err := b.reach.take(keys, tags); err != nil {
			// Its keys would spend what the records behind it need, or
			// more than the attempt has: none is sent.
			b.planErr[r] = cmp.Or(b.planErr[r], err)
			keys, tags = keys[:0], tags[:0]
		}
		// Keys planned for a failing record are still deleted: an extra
		// invalidation is harmless, a missed one serves stale data. The
		// record fails all the same, so it is retried or parked.
		for j, k := range keys {
			i, ok := b.index[k]
			if !ok {
				i = int32(len(b.keys))
				b.index[k] = i
				b.keys = append(b.keys, k)
				b.prio = append(b.prio, keyPrio[j])
			}
			b.prio[i] = min(b.prio[i], keyPrio[j])
			b.recKeys = append(b.recKeys, i)
		}
		for j, t := range tags {
			i := b.tag(t)
			b.tagPrio[i] = min(b.tagPrio[i], tagPrio[j])
			b.recTags = append(b.recTags, i)
		}
		b.recEnd[r] = int32(len(b.recKeys))
		b.recTagEnd[r] = int32(len(b.recTags))
	}
}

// tag is the index of tag among the batch's, added if new.
func (b *batch) tag(tag string) int32 {
	if b.tagIndex == nil {
		b.tagIndex = map[string]int32{}
	}
	i, ok := b.tagIndex[tag]
	if !ok {
		i = int32(len(b.tags))
		b.tagIndex[tag] = i
		b.tags = append(b.tags, tag)
		b.tagPrio = append(b.tagPrio, secondDeletes)
	}
	return i
}

// pause waits before the next attempt (wait.Backoff), and reports false
// when the context ends first or its deadline is too near.
func (inv *Invalidator) pause(ctx context.Context, attempt int) bool {
	d := wait.Backoff(inv.opts.Backoff, inv.opts.MaxBackoff, attempt)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	return wait.For(ctx, d)
}

func (inv *Invalidator) report(records []Record, b *batch) Report {
	rep := Report{Results: make([]Result, len(records))}
	m := &rep.Metrics
	m.Records = len(records)
	m.ECPUs, m.Bytes, m.Throttled = int64(math.Ceil(float64(b.spent.Load())/1000)), b.bytes.Load(), b.throttled.Load()
	m.FleetDown = inv.pace.fleetDown()
	for _, s := range b.status {
		switch s {
		case KeyDeleted:
			m.KeysDeleted++
		case KeyAbsent:
			m.KeysAbsent++
		default:
			m.KeysFailed++
		}
	}
	for _, o := range b.tagOut {
		if o.err == nil {
			m.TagsInvalidated++
		} else {
			m.TagsFailed++
		}
		m.TagEntriesDeleted += o.deleted
	}
	now := time.Now()
	keys := make([]KeyResult, len(b.recKeys)) // one allocation for every record's keys
	tags := make([]TagResult, len(b.recTags))
	for r := range records {
		res := &rep.Results[r]
		res.Record = records[r].ID
		res.Err = records[r].Err
		res.SecondDelete = len(records[r].Changes) > 0
		res.Failover = res.SecondDelete
		for c := range records[r].Changes {
			res.SecondDelete = res.SecondDelete && records[r].Changes[c].SecondDelete
			res.Failover = res.Failover && records[r].Changes[c].Failover
		}
		if res.Err == nil {
			res.Err = b.planErr[r]
			res.Transient = errors.Is(res.Err, errPastReach)
		}
		start := int32(0)
		if r > 0 {
			start = b.recEnd[r-1]
		}
		res.Keys = keys[start:b.recEnd[r]:b.recEnd[r]]
		var failed int
		var keyErr error // a transient one when any key failed for now
		for i, k := range b.recKeys[start:b.recEnd[r]] {
			res.Keys[i] = KeyResult{Key: b.keys[k], Status: b.status[k]}
			if b.status[k] != KeyFailed {
				continue
			}
			failed++
			err := cmp.Or(b.errs[k], errNotAttempted)
			if !permanentKeyError(err) {
				res.Transient = true
				keyErr = err
			} else if !res.Transient {
				keyErr = err
			}
		}
		// The error that decides what becomes of the record comes first:
		// keys to retry, then why it can never pass.
		if failed > 0 && (res.Transient || res.Err == nil) {
			res.Err = &keyError{Failed: failed, Err: keyErr}
		}
		b.tagResults(r, res, tags)
		if res.Err == nil {
			for c := range records[r].Changes {
				if at := records[r].Changes[c].OccurredAt; !at.IsZero() {
					m.MaxLag = max(m.MaxLag, now.Sub(at))
				}
			}
			continue
		}
		m.Failed++
		if res.Transient {
			m.Transient++
		}
	}
	return rep
}
