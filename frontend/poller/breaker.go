package poller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// cacheState is what a batch showed of the cache.
type cacheState uint8

const (
	none cacheState = iota // nothing either way: no message, or only bad ones
	up                     // a record was done
	down                   // every record failed for now
)

// breaker stops the receivers while the whole cache is unreachable,
// instead of churning receives that can only fail and raise the messages'
// receive counts towards the DLQ. A batch whose every record failed for now
// opens it unless a probe finds a node answering: one node down stops
// nothing. While it is open one receiver at a time probes the cache, every
// probeEvery, without receiving; the first answer closes it, and every
// receiver resumes at once, the backlog waiting for them in the queue.
type breaker struct {
	probe func(context.Context) error
	log   *slog.Logger

	mu     sync.Mutex
	open   bool
	closed chan struct{} // closed when the breaker closes
	turn   chan struct{} // holds the probe's turn
}

// probeEvery is how often an open breaker asks the cache whether it answers.
const probeEvery = 250 * time.Millisecond

func newBreaker(probe func(context.Context) error, log *slog.Logger) *breaker {
	b := &breaker{probe: probe, log: log, closed: make(chan struct{}), turn: make(chan struct{}, 1)}
	close(b.closed)
	b.turn <- struct{}{}
	return b
}

// acquire waits until the caller may receive, probing the cache meanwhile
// when its turn comes. It reports false when ctx ends first.
func (b *breaker) acquire(ctx context.Context) bool {
	for {
		b.mu.Lock()
		open, closed := b.open, b.closed
		b.mu.Unlock()
		if !open {
			return true
		}
		select {
		case <-b.turn:
			for ctx.Err() == nil && !b.answers(ctx) {
				wait.For(ctx, probeEvery)
			}
			if ctx.Err() == nil {
				b.set(false)
			}
			b.turn <- struct{}{}
		case <-closed:
		case <-ctx.Done():
			return false
		}
	}
}

// saw tells the breaker what a batch showed.
func (b *breaker) saw(ctx context.Context, state cacheState) {
	switch {
	case state == up:
		b.set(false)
	case state == down && ctx.Err() == nil:
		// Not while stopping: a probe cut short by the stop says nothing.
		if !b.answers(ctx) && ctx.Err() == nil {
			b.set(true)
		}
	}
}

// answers probes the cache, for at most a second.
func (b *breaker) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return b.probe(ctx) == nil
}

// set opens or closes the breaker, and says so when that changes it.
func (b *breaker) set(open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == open {
		return
	}
	b.open = open
	if open {
		b.closed = make(chan struct{})
		b.log.Warn("the cache is unreachable: receiving stops, the cache is probed every 250 ms")
		return
	}
	close(b.closed)
	b.log.Info("the cache answers again: receiving resumes")
}
