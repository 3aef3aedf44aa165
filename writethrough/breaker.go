package writethrough

import (
	"sync"
	"sync/atomic"
	"time"
)

// answer is what one call showed of the cache.
type answer uint8

const (
	unknown answer = iota // the caller gave up first: nothing either way
	up                    // the cache answered, if only with a miss or an error reply
	down                  // it did not (timeout, no connection, CLUSTERDOWN...)
)

// breaker keeps calls away from a cache that stopped answering, so that
// while it is down a read costs a load, not a timeout and then a load.
// After threshold calls in a row found it down, it opens: calls fail at
// once for coolDown; then one call at a time, the probe, goes through. The
// first answer closes it; a probe that finds the cache down opens it for
// another cool-down.
type breaker struct {
	threshold int32 // 0: never opens
	coolDown  time.Duration
	clock     Clock

	downs    atomic.Int32 // calls in a row that found the cache down
	isOpen   atomic.Bool  // read without the lock on every call
	lastDown atomic.Int64 // when a call last found the cache down, in Unix ns; 0: not lately

	mu      sync.Mutex
	until   time.Time // while open, no probe before
	probing bool      // a probe is in flight
}

// allow tells whether a call may go to the cache; probe says it is the
// probe, to report with done.
func (b *breaker) allow() (probe, ok bool) {
	if !b.isOpen.Load() {
		return false, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.isOpen.Load():
		return false, true
	case b.probing || b.clock.Now().Before(b.until):
		return false, false
	}
	b.probing = true
	return true, true
}

// done reports what a call allowed by allow showed.
func (b *breaker) done(probe bool, a answer) {
	switch a {
	case up:
		if b.downs.Load() != 0 {
			b.downs.Store(0)
		}
		if b.isOpen.Load() || probe {
			b.mu.Lock()
			b.isOpen.Store(false)
			b.probing = false
			b.mu.Unlock()
		}
	case down:
		b.lastDown.Store(b.clock.Now().UnixNano())
		n := b.downs.Add(1)
		if probe || b.threshold > 0 && n >= b.threshold && !b.isOpen.Load() {
			b.mu.Lock()
			// A call that started before the breaker opened does not push
			// the probe back; a failed probe does.
			if probe || !b.isOpen.Load() {
				b.isOpen.Store(true)
				b.until = b.clock.Now().Add(b.coolDown)
			}
			if probe {
				b.probing = false
			}
			b.mu.Unlock()
		}
	default:
		if probe {
			b.mu.Lock()
			b.probing = false // the next call probes
			b.mu.Unlock()
		}
	}
}

// waryFor is how long after the cache was last found down valkey-go may
// still be reopening connections: its dials and handshakes (5 s each by
// default), keep-alive pings (10 s) and topology refreshes.
const waryFor = time.Minute

// wary tells whether the cache was found down within waryFor.
func (b *breaker) wary() bool {
	last := b.lastDown.Load()
	if last == 0 {
		return false
	}
	if b.clock.Now().UnixNano()-last < int64(waryFor) {
		return true
	}
	b.lastDown.CompareAndSwap(last, 0) // spares the clock to the calls after
	return false
}
