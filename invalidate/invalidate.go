package invalidate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
)

// Cache is what an Invalidator needs of a client; valkey.Client has it.
type Cache interface {
	B() valkey.Builder
	DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult
}

// Options tune an Invalidator. The zero value gives the defaults.
type Options struct {
	// Rules plan the keys of each change. Default: DefaultRules().
	Rules *Rules
	// Chunk is the number of UNLINK commands per DoMulti call. Default 500.
	Chunk int
	// Parallel is how many DoMulti calls may run at once. Default 8: enough
	// in flight to keep the pipelines to every node full.
	Parallel int
	// MaxAttempts is how many times a key is tried before its records fail.
	// Default 5. Retries stop earlier when the context deadline is too near
	// for the next pause.
	MaxAttempts int
	// Backoff is the pause before the first retry, doubled for each next one
	// up to MaxBackoff, with jitter. Defaults 50 ms and 1 s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Now tells the time, for lag. Default time.Now.
	Now func() time.Time
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
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 50 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Invalidator deletes the cache keys of batches of records. It is safe for
// concurrent use.
type Invalidator struct {
	cache Cache
	opts  Options
}

// New returns an Invalidator deleting from cache.
func New(cache Cache, opts Options) *Invalidator {
	opts.defaults()
	return &Invalidator{cache: cache, opts: opts}
}

// Record is one input record — an SQS message, an SNS record, a stream
// record — with its decoded changes, or the error that decoding gave.
type Record struct {
	ID      string // message ID or sequence number, reported back on failure
	Changes []events.Change
	Err     error
}

// KeyStatus is what happened to one key.
type KeyStatus uint8

// The outcomes of a key.
const (
	KeyFailed  KeyStatus = iota // not deleted: see the record's error
	KeyDeleted                  // it existed and was deleted
	KeyAbsent                   // it did not exist: nothing to delete
)

func (s KeyStatus) String() string { return [...]string{"failed", "deleted", "absent"}[s] }

// KeyResult is the outcome of one key of a record.
type KeyResult struct {
	Key    string
	Status KeyStatus
}

// Result is the outcome of one record. It succeeded when Err is nil: every
// one of its keys was deleted or already absent.
type Result struct {
	Record string
	Keys   []KeyResult
	Err    error
}

// Metrics count a batch, for the front ends to log and emit.
type Metrics struct {
	Records     int
	Failed      int // records that failed
	KeysDeleted int // distinct keys
	KeysAbsent  int
	KeysFailed  int
	// MaxLag is the longest time between a change and its invalidation,
	// among the changes that say when they happened.
	MaxLag time.Duration
}

// Report is the outcome of a batch: one Result per record, in input order.
type Report struct {
	Results []Result
	Metrics Metrics
}

// Failed returns the IDs of the records that failed, in input order.
func (r *Report) Failed() []string {
	var ids []string
	for i := range r.Results {
		if r.Results[i].Err != nil {
			ids = append(ids, r.Results[i].Record)
		}
	}
	return ids
}

// ErrInternal is wrapped by the errors of a bug caught while sending: the
// keys fail, so their records are retried later, but not within the batch.
var ErrInternal = errors.New("internal error")

// KeyError says which keys of a record could not be deleted and why.
type KeyError struct {
	Failed int   // keys of the record not deleted
	Err    error // the last error of one of them
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("%d key(s) not deleted: %v", e.Failed, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// batch is the state of one Invalidate call: the distinct keys and, for
// each record, where its keys are among them.
type batch struct {
	keys    []string
	index   map[string]int32
	status  []KeyStatus
	errs    []error // the last error of each failed key
	recKeys []int32 // the keys of every record, record after record
	recEnd  []int32 // where each record's keys end in recKeys
	planErr []error
}

// decodeChunk is how many records are decoded before their keys are sent:
// the deletes of the first records then overlap the decoding of the rest.
const decodeChunk = 128

// Invalidate decodes a batch, plans its keys and deletes them, and reports
// each record. Large batches are decoded on every CPU, and the keys of each
// decoded chunk of records are sent while the next chunks are decoded. It
// returns when every key is settled: deleted, absent, or failed after its
// retries or at the context's deadline.
func (inv *Invalidator) Invalidate(ctx context.Context, in Batch) Report {
	records := make([]Record, in.Len)
	ready := decodeAll(in, records)
	b := &batch{
		index:   make(map[string]int32, len(records)),
		recEnd:  make([]int32, len(records)),
		planErr: make([]error, len(records)),
	}
	f := inv.flight(ctx)
	for lo := 0; lo < len(records); lo += decodeChunk {
		hi := min(lo+decodeChunk, len(records))
		ready(lo / decodeChunk)
		from := len(b.keys)
		inv.plan(b, records, lo, hi)
		for start := from; start < len(b.keys); start += inv.opts.Chunk {
			f.send(b.keys[start:min(start+inv.opts.Chunk, len(b.keys))], int32(start), nil)
		}
	}
	b.status = make([]KeyStatus, len(b.keys))
	b.errs = make([]error, len(b.keys))
	pending := f.settle(b)
	for attempt := 1; len(pending) > 0 && attempt < inv.opts.MaxAttempts && inv.pause(ctx, attempt); attempt++ {
		f = inv.flight(ctx)
		for start := 0; start < len(pending); start += inv.opts.Chunk {
			idx := pending[start:min(start+inv.opts.Chunk, len(pending))]
			keys := make([]string, len(idx))
			for i, k := range idx {
				keys[i] = b.keys[k]
			}
			f.send(keys, 0, idx)
		}
		pending = f.settle(b)
	}
	return inv.report(records, b)
}

// plan adds the keys of records[lo:hi] to the batch.
func (inv *Invalidator) plan(b *batch, records []Record, lo, hi int) {
	var scratch []string
	for r := lo; r < hi; r++ {
		// A record that failed to decode may still carry the changes that
		// did decode (one bad element of an array): they are planned too.
		for c := range records[r].Changes {
			var err error
			scratch, err = inv.opts.Rules.Keys(&records[r].Changes[c], scratch[:0])
			if err != nil && b.planErr[r] == nil {
				b.planErr[r] = err
			}
			// Keys planned for a failing record are still deleted: an extra
			// invalidation is harmless, a missed one serves stale data.
			// The record fails all the same, so it is retried.
			for _, k := range scratch {
				i, ok := b.index[k]
				if !ok {
					i = int32(len(b.keys))
					b.index[k] = i
					b.keys = append(b.keys, k)
				}
				b.recKeys = append(b.recKeys, i)
			}
		}
		b.recEnd[r] = int32(len(b.recKeys))
	}
}

// flight sends chunks of keys, at most Parallel at once, and gathers what
// happened to them.
type flight struct {
	inv   *Invalidator
	ctx   context.Context
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	sent  []sent
}

// sent is the outcome of one chunk: the keys from index first on, or at
// the indices idx when it is set.
type sent struct {
	first  int32
	idx    []int32
	status []KeyStatus
	errs   []error // nil when none failed
}

func (inv *Invalidator) flight(ctx context.Context) *flight {
	return &flight{inv: inv, ctx: ctx, slots: make(chan struct{}, inv.opts.Parallel)}
}

// send deletes keys in the background. Each chunk gets the keys it sends
// and slices of its own for their outcomes, so it shares nothing with the
// planning that goes on meanwhile.
func (f *flight) send(keys []string, first int32, idx []int32) {
	f.slots <- struct{}{}
	f.wg.Go(func() {
		defer func() { <-f.slots }()
		out := sent{first: first, idx: idx, status: make([]KeyStatus, len(keys))}
		defer func() {
			// A bug must fail its keys, not the process.
			if p := recover(); p != nil {
				out.errs = make([]error, len(keys))
				for i := range out.errs {
					if out.status[i] == KeyFailed {
						out.errs[i] = fmt.Errorf("%w: %v", ErrInternal, p)
					}
				}
			}
			f.mu.Lock()
			f.sent = append(f.sent, out)
			f.mu.Unlock()
		}()
		f.inv.unlink(f.ctx, keys, &out)
	})
}

// settle waits for every chunk, records the outcomes in the batch and
// returns the keys to try again.
func (f *flight) settle(b *batch) (retry []int32) {
	f.wg.Wait()
	for _, s := range f.sent {
		for i, st := range s.status {
			k := s.first + int32(i)
			if s.idx != nil {
				k = s.idx[i]
			}
			b.status[k] = st
			if s.errs != nil && s.errs[i] != nil {
				b.errs[k] = s.errs[i]
				if st == KeyFailed && transient(f.ctx, s.errs[i]) {
					retry = append(retry, k)
				}
			}
		}
	}
	return retry
}

// unlink sends one UNLINK per key in one DoMulti.
func (inv *Invalidator) unlink(ctx context.Context, keys []string, out *sent) {
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = inv.cache.B().Unlink().Key(k).Build()
	}
	for i, res := range inv.cache.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		switch {
		case err == nil && n > 0:
			out.status[i] = KeyDeleted
		case err == nil:
			out.status[i] = KeyAbsent
		default:
			if out.errs == nil {
				out.errs = make([]error, len(keys))
			}
			out.errs[i] = err
		}
	}
}

// transient reports whether an error may pass on retry: lost connections
// and timeouts, and the server replies of a cluster in motion. A bug is
// not retried.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, valkey.ErrClosing) || errors.Is(err, ErrInternal) {
		return false
	}
	if verr, ok := valkey.IsValkeyErr(err); ok {
		msg := verr.Error()
		for _, prefix := range []string{"TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "BUSY", "MOVED", "ASK", "READONLY"} {
			if strings.HasPrefix(msg, prefix) {
				return true
			}
		}
		return false
	}
	return true
}

// pause waits before the next attempt, exponential with equal jitter, and
// reports false when the context ends first or its deadline is too near.
func (inv *Invalidator) pause(ctx context.Context, attempt int) bool {
	d := min(inv.opts.Backoff<<min(attempt-1, 20), inv.opts.MaxBackoff)
	d = d/2 + rand.N(d/2+1)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (inv *Invalidator) report(records []Record, b *batch) Report {
	rep := Report{Results: make([]Result, len(records))}
	m := &rep.Metrics
	m.Records = len(records)
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
	now := inv.opts.Now()
	keys := make([]KeyResult, len(b.recKeys)) // one allocation for every record's keys
	for r := range records {
		res := &rep.Results[r]
		res.Record = records[r].ID
		res.Err = records[r].Err
		if res.Err == nil {
			res.Err = b.planErr[r]
		}
		start := int32(0)
		if r > 0 {
			start = b.recEnd[r-1]
		}
		res.Keys = keys[start:b.recEnd[r]:b.recEnd[r]]
		var failed int
		var lastErr error
		for i, k := range b.recKeys[start:b.recEnd[r]] {
			res.Keys[i] = KeyResult{Key: b.keys[k], Status: b.status[k]}
			if b.status[k] == KeyFailed {
				failed++
				lastErr = b.errs[k]
			}
		}
		if res.Err == nil && failed > 0 {
			if lastErr == nil {
				lastErr = errors.New("not attempted before the deadline")
			}
			res.Err = &KeyError{Failed: failed, Err: lastErr}
		}
		if res.Err != nil {
			m.Failed++
		}
		for c := range records[r].Changes {
			if at := records[r].Changes[c].OccurredAt; !at.IsZero() {
				m.MaxLag = max(m.MaxLag, now.Sub(at))
			}
		}
	}
	return rep
}
