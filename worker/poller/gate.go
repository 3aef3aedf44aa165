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

// gate stops the receivers while the whole cache is unreachable, instead
// of churning receives that can only fail and raise the messages' receive
// counts towards the DLQ. It is driven by probes, not by counting failures
// (unlike writethrough's circuit breaker): a batch whose every record failed
// for now shuts it unless a probe finds a node answering, so one node down
// stops nothing. While it is shut one receiver at a time probes the cache,
// every probeEvery, without receiving; the first answer opens it, and every
// receiver resumes at once, the backlog waiting for them in the queue.
type gate struct {
	probe func(context.Context) error
	log   *slog.Logger

	mu     sync.Mutex
	shut   bool
	opened chan struct{} // closed when the gate opens
	turn   chan struct{} // holds the probe's turn
}

// probeEvery is how often a shut gate asks the cache whether it answers.
const probeEvery = 250 * time.Millisecond

func newGate(probe func(context.Context) error, log *slog.Logger) *gate {
	g := &gate{probe: probe, log: log, opened: make(chan struct{}), turn: make(chan struct{}, 1)}
	close(g.opened)
	g.turn <- struct{}{}
	return g
}

// pass waits until the caller may receive, probing the cache meanwhile
// when its turn comes. It reports false when ctx ends first.
func (g *gate) pass(ctx context.Context) bool {
	for {
		g.mu.Lock()
		shut, opened := g.shut, g.opened
		g.mu.Unlock()
		if !shut {
			return true
		}
		select {
		case <-g.turn:
			for ctx.Err() == nil && !g.answers(ctx) {
				wait.For(ctx, probeEvery)
			}
			if ctx.Err() == nil {
				g.set(false)
			}
			g.turn <- struct{}{}
		case <-opened:
		case <-ctx.Done():
			return false
		}
	}
}

// saw tells the gate what a batch showed.
func (g *gate) saw(ctx context.Context, state cacheState) {
	switch {
	case state == up:
		g.set(false)
	case state == down && ctx.Err() == nil:
		// Not while stopping: a probe cut short by the stop says nothing.
		if !g.answers(ctx) && ctx.Err() == nil {
			g.set(true)
		}
	}
}

// answers probes the cache, for at most a second.
func (g *gate) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return g.probe(ctx) == nil
}

// set shuts or opens the gate, and says so when that changes it.
func (g *gate) set(shut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut == shut {
		return
	}
	g.shut = shut
	if shut {
		g.opened = make(chan struct{})
		g.log.Warn("the cache is unreachable: receiving stops, the cache is probed every 250 ms")
		return
	}
	close(g.opened)
	g.log.Info("the cache answers again: receiving resumes")
}
