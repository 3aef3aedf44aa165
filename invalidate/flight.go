package invalidate

import (
	"context"
	"math"
	"sync"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// flight sends chunks of keys, at most Parallel at once, and gathers what
// happened to them.
type flight struct {
	inv   *Invalidator
	ctx   context.Context
	b     *batch // whose costs it counts
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

// flight sends keys of b, whose ECPUs it counts.
func (inv *Invalidator) flight(ctx context.Context, b *batch) *flight {
	return &flight{inv: inv, ctx: ctx, b: b, slots: make(chan struct{}, inv.opts.Parallel)}
}

// send deletes keys in the background, when the budget lets it at prio.
// Each chunk gets the keys it sends and slices of its own for their
// outcomes, so it shares nothing with the planning that goes on meanwhile.
func (f *flight) send(keys []string, first int32, idx []int32, prio priority) {
	f.slots <- struct{}{}
	f.wg.Go(func() {
		defer func() { <-f.slots }()
		out := sent{first: first, idx: idx, status: make([]KeyStatus, len(keys))}
		defer func() {
			// A bug must fail its keys, not the process.
			if p := recover(); p != nil {
				err := PanicError("sending", p)
				out.errs = make([]error, len(keys))
				for i := range out.errs {
					if out.status[i] == KeyFailed {
						out.errs[i] = err
					}
				}
			}
			f.mu.Lock()
			f.sent = append(f.sent, out)
			f.mu.Unlock()
		}()
		var c cost
		for _, k := range keys {
			c = c.plus(unlinkCost(k))
		}
		if err := f.inv.pace.take(f.ctx, prio, c.ecpus); err != nil {
			out.errs = make([]error, len(keys))
			for i := range out.errs {
				out.errs[i] = err
			}
			return
		}
		f.b.count(c)
		ctx, cancel := context.WithTimeout(f.ctx, f.inv.opts.AttemptTimeout)
		defer cancel()
		out.errs = f.inv.cache.Unlink(ctx, keys, out.status)
		for _, err := range out.errs {
			if cacheerr.Throttled(err) {
				f.inv.pace.throttled()
				f.b.throttled.Add(1)
			}
		}
	})
}

// count adds c to the batch's costs.
func (b *batch) count(c cost) {
	b.spent.Add(int64(math.Ceil(c.ecpus * 1000)))
	b.bytes.Add(int64(c.bytes))
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
				b.errs[k] = lastError(s.errs[i], b.errs[k])
				if st == KeyFailed && f.ctx.Err() == nil && !permanentKeyError(s.errs[i]) {
					retry = append(retry, k)
				}
			}
		}
	}
	return retry
}
