package poller

import (
	"context"
	"sync"
)

// cacheState is what a batch showed of the cache.
type cacheState uint8

const (
	none cacheState = iota // nothing either way: no message, or only bad ones
	up                     // a record was done
	down                   // every record failed for now
)

// breaker stops the receivers while the cache is unreachable, instead of
// churning receives that can only fail. It opens when a whole batch failed
// for now. While it is open, one receiver at a time — the probe — takes a
// batch, whose keys are retried until the cache answers or the batch's time
// is spent; the first record done closes it, and every receiver resumes.
type breaker struct {
	mu     sync.Mutex
	open   bool
	closed chan struct{} // closed when the breaker closes
	probe  chan struct{} // holds the probe's turn
}

func newBreaker() *breaker {
	b := &breaker{closed: make(chan struct{}), probe: make(chan struct{}, 1)}
	close(b.closed)
	b.probe <- struct{}{}
	return b
}

// acquire waits until the caller may receive; probe says it took the
// probe's turn, to give back with release. It reports false when ctx ends
// first.
func (b *breaker) acquire(ctx context.Context) (probe, ok bool) {
	for {
		b.mu.Lock()
		open, closed := b.open, b.closed
		b.mu.Unlock()
		if !open {
			return false, true
		}
		select {
		case <-b.probe:
			return true, true
		case <-closed:
		case <-ctx.Done():
			return false, false
		}
	}
}

// release tells what the caller's batch showed, gives back the probe's
// turn when the caller had it, and reports whether the breaker opened or
// closed.
func (b *breaker) release(probe bool, state cacheState) (changed bool) {
	b.mu.Lock()
	switch {
	case state == up && b.open:
		b.open, changed = false, true
		close(b.closed)
	case state == down && !b.open:
		b.open, changed = true, true
		b.closed = make(chan struct{})
	}
	b.mu.Unlock()
	if probe {
		b.probe <- struct{}{}
	}
	return changed
}
