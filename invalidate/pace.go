package invalidate

import (
	"cmp"
	"context"
	"math"
	"sync"
	"time"
)

// priority orders what waits for the cache's budget: the first deletes of
// keys, then tags' pages, then second deletes, which only guard against a
// rare race and may come last.
type priority uint8

const (
	firstDeletes priority = iota
	tagPages
	secondDeletes
	priorities
)

// burstWindow is how much of a second's budget the pacer lets go at once:
// over any second the Invalidator asks at most 1.1 seconds' worth, and one
// command more.
const burstWindow = 100 * time.Millisecond

// After a throttling reply the pacer halves its rate, down to a twentieth
// of the budget, then takes it back over recoverIn: the budget is each
// process's, and several busy at once may together still be over the
// cache's limit. The replies to one burst halve it once: within slowEvery.
const (
	lowestShare = 20
	recoverIn   = 10 * time.Second
	slowEvery   = 250 * time.Millisecond
)

// pacer keeps an Invalidator's spending within a budget of ECPUs a second:
// a token bucket that a command may leave in debt, so that a command
// larger than a burst still goes, and the next waits out its cost. Who
// waits goes by priority (promoteAfter).
type pacer struct {
	mu      sync.Mutex
	budget  float64 // ECPUs a second, as configured
	fleet   *fleetShare
	rate    float64 // now: lower after a throttling reply
	level   float64 // ECPUs that may go now; below 0, owed
	at      time.Time
	waiting [priorities]int
	pending float64       // what the waiters need
	changed chan struct{} // closed when a waiter goes or gives up
	slowed  time.Time     // the last halving
}

func newPacer(budget float64, fleet Budget, fallback float64) *pacer {
	if budget <= 0 {
		return nil
	}
	p := &pacer{budget: budget, rate: budget, level: budget * burstWindow.Seconds(), at: time.Now(), changed: make(chan struct{})}
	if fleet != nil {
		p.fleet = &fleetShare{budget: fleet, fallback: cmp.Or(min(fallback, budget), budget/100)}
	}
	return p
}

// refill adds what the time since the last call earned, and takes the rate
// back towards the budget, the fallback share's while the fleet's budget
// cannot be read. Called with mu held.
func (p *pacer) refill() {
	now := time.Now()
	dt := now.Sub(p.at).Seconds()
	p.at = now
	ceiling := p.budget
	if f := p.fleet; f != nil {
		if f.down {
			ceiling = f.fallback
		}
		if !f.until.IsZero() && now.After(f.until) {
			f.lapsed = f.have > f.last/2
			f.have, f.until = min(f.have, 0), time.Time{} // a grant not spent in its time is gone; a debt stays
		}
		f.recent *= math.Exp(-dt / holdFor.Seconds())
	}
	p.level = min(p.level+dt*p.rate, p.rate*burstWindow.Seconds())
	p.rate = min(ceiling, p.rate+dt*ceiling/recoverIn.Seconds())
}

// promoteAfter is how long a waiter waits at its priority before it
// rises to the next: a big tag's pages, always waiting, would otherwise
// hold second deletes back until it is done, and a flood of first deletes
// the tags.
const promoteAfter = time.Second

// take waits until cost may go at prio, and counts it; it returns ctx's
// error if ctx ends first. A nil pacer has no budget: nothing waits.
func (p *pacer) take(ctx context.Context, prio priority, cost float64) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting[prio]++
	p.pending += cost
	since, first := time.Now(), prio == firstDeletes // the fleet's priority is what it asks for, not what waiting made it

	defer func() {
		p.waiting[prio]--
		p.pending -= cost
		if p.queued() > 0 { // those that waited behind it look again
			close(p.changed)
			p.changed = make(chan struct{})
		}
	}()
	for {
		p.refill()
		if prio > 0 && time.Since(since) >= promoteAfter {
			p.waiting[prio]--
			prio--
			p.waiting[prio]++
			since = time.Now()
		}
		ahead := false
		for _, n := range p.waiting[:prio] {
			ahead = ahead || n > 0
		}
		p.askAgain(first, cost)
		granted := p.fleet.granted(cost)
		if !ahead && p.level >= 0 && granted {
			p.level -= cost
			p.fleet.spend(cost)
			return nil
		}
		// Behind a higher priority, wait for it to go; else for the debt to
		// be paid off, or for the fleet's grant.
		paid := max(time.Duration(-p.level/p.rate*float64(time.Second)), time.Millisecond)
		switch {
		case ahead:
			paid = since.Add(promoteAfter).Sub(time.Now())
		case p.level >= 0:
			paid = p.ask(first, cost)
		}
		changed := p.changed
		p.mu.Unlock()
		t := time.NewTimer(paid)
		select {
		case <-ctx.Done():
		case <-changed:
		case <-t.C:
		}
		t.Stop()
		p.mu.Lock()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (p *pacer) queued() (n int) {
	for _, w := range p.waiting {
		n += w
	}
	return n
}

// spend counts cost already sent, which the next to take waits out.
func (p *pacer) spend(cost float64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refill()
	p.level -= cost
	p.fleet.spend(cost)
}

// throttled slows the pacer after the cache answered that it throttled.
func (p *pacer) throttled() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refill()
	if time.Since(p.slowed) < slowEvery {
		return // the same burst's other replies
	}
	p.slowed = time.Now()
	p.rate = max(p.rate/2, p.budget/lowestShare)
	p.level = min(p.level, 0)
}
