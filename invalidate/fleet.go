package invalidate

import (
	"context"
	"time"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
	"github.com/invalidator-go/invalidator/internal/fleetbudget"
)

// Budget is an ECPU budget that processes share: the worker's fleet keeps
// one in the cache (internal/fleetbudget). The Invalidator asks it in
// chunks; see Options.Fleet.
type Budget interface {
	// Take asks for want ECPUs, for first deletes or not, from its place
	// in the line of refused takes (0: none). It returns the ECPUs granted,
	// want or none; the time to wait, before spending them when granted,
	// before asking again when refused; and, when refused, its place to
	// ask again with. First deletes are never refused.
	Take(ctx context.Context, want float64, first bool, place int64) (got float64, wait time.Duration, next int64, err error)
}

// ValkeyBudget is the budget of perSecond ECPUs a second that every
// process on client's cache given the same budget shares, kept in the
// cache at two keys on two shards, which their user needs in its key
// patterns: invalidator:ecpu-budget:* (internal/fleetbudget says how it
// is kept). One process's: it remembers the line its place is in.
func ValkeyBudget(client ValkeyClient, perSecond float64) Budget {
	return valkeyBudget{client, fleetbudget.New(perSecond)}
}

type valkeyBudget struct {
	client ValkeyClient
	budget *fleetbudget.Budget
}

func (b valkeyBudget) Take(ctx context.Context, want float64, first bool, place int64) (float64, time.Duration, int64, error) {
	return b.budget.Take(ctx, b.client, want, first, place, fleetbudget.Reserve)
}

// How the pacer takes from the fleet's budget. A grant is asked for what a
// command needs or what the process spent over the last holdFor, up to
// chunk of a second's budget, so that a busy process asks about ten times
// a second and one that deletes a key now and then asks for little; what
// it does not spend within holdFor is gone, so that no grant is spent in
// another second than its own. A refused process asks again after the
// budget's wait, from its place in the line: a fleet waiting for its turn
// asks about once per grant, not each process every time a grant frees.
// While the fleet wants more than its budget (a take refused within
// contended), a process asks for what its waiters need, at least a chunk
// unless its last grant lapsed mostly unspent (what lapses is lost to the
// processes in line behind it: a trickle granted chunks starves a big
// sender), at most mostChunk of a second's budget or grantFloor ECPUs (a
// turn in the line costs two takes of about an ECPU each), unless one
// command needs more, since a grant that runs ahead holds the fleet's first
// deletes back. At its turn it is granted what its place holds, so that a
// grant the line did not expect puts no one behind it out of turn, and it
// keeps a grant as long as its own pace needs to spend it.
// First deletes, which a process most often sends as a trickle, hold a
// grant for firstHold and ask for that long at their recent pace: a take
// a second of a trickle's deletes, not four.
// When the budget cannot be read (its key denied, the cache out of reach
// or throttling), the pacer keeps to its fallback share and tries the
// budget again after fleetRetry, or a second when the error may pass (its
// node failing over: the deletes after a failover must not crawl at the
// fallback share for long).
const (
	chunk      = 0.1
	holdFor    = 250 * time.Millisecond
	firstHold  = time.Second
	askWithin  = time.Second
	contended  = 10 * time.Second
	mostChunk  = 0.25
	grantFloor = 200
	fleetRetry = 30 * time.Second
)

// fleetShare is a pacer's part in the fleet's budget. Guarded by the
// pacer's mu.
type fleetShare struct {
	budget   Budget
	fallback float64   // ECPUs a second while down
	have     float64   // granted, not spent yet; below 0, owed
	until    time.Time // when what is had is gone
	recent   float64   // ECPUs spent, decaying over holdFor
	last     float64   // the last grant
	lapsed   bool      // whether over half of the last grant lapsed unspent
	asking   bool
	retry    time.Time // when a refused process may ask again
	place    int64     // its place in the line, to ask again with
	reserved float64   // what its place holds
	refused  time.Time // when it last joined the line
	down     bool      // the budget could not be read: the fallback share
	downAt   time.Time
	downFor  time.Duration
	onDown   func(error) // told when the budget could not be read, and when it is back (nil)
}

// granted says whether cost may go as far as the fleet is concerned.
func (f *fleetShare) granted(cost float64) bool {
	if f == nil {
		return true
	}
	return f.down || f.have >= cost
}

// askAgain asks the fleet's budget again, in the background, once it has
// been down for its time: meanwhile the fallback share paces the process,
// whose commands do not wait on a budget that may not answer. Called with
// p.mu held.
func (p *pacer) askAgain(first bool, cost float64) {
	if f := p.fleet; f != nil && f.down && !f.asking && time.Since(f.downAt) >= f.downFor {
		p.ask(first, cost)
	}
}

func (f *fleetShare) spend(cost float64) {
	if f == nil {
		return
	}
	f.recent += cost
	if !f.down {
		f.have -= cost
	}
}

// ask asks the fleet's budget for what cost needs, unless a request is on
// its way or the process was told to wait, and returns how long to wait for
// the answer at most. Called with p.mu held.
func (p *pacer) ask(first bool, cost float64) time.Duration {
	f := p.fleet
	now := time.Now()
	if f == nil {
		return time.Millisecond
	}
	if f.asking {
		return askWithin
	}
	if !first && now.Before(f.retry) {
		return f.retry.Sub(now)
	}
	// What is had counts only as a debt: what is left of a grant is
	// most likely gone before a turn in the line comes.
	owed := -min(f.have, 0)
	want := max(cost+owed, min(f.recent, p.budget*chunk))
	place, hold := f.place, holdFor
	switch {
	case first:
		place, hold = 0, firstHold
		want = max(want, min(f.recent*float64(firstHold/holdFor), p.budget*chunk))
	case place != 0:
		want = max(f.reserved, cost+owed) // more than its place holds only for a larger command come first
	case now.Sub(f.refused) < contended:
		want = max(want, min(p.pending+owed, max(p.budget*mostChunk, grantFloor)))
		if !f.lapsed {
			want = max(want, p.budget*chunk)
		}
	}
	f.asking = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), askWithin)
		got, wait, next, err := f.budget.Take(ctx, want, first, place)
		cancel()
		if err == nil && got > 0 && wait > 0 {
			time.Sleep(wait) // its turn, behind the fleet's first deletes
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		now := time.Now()
		f.asking = false
		switch {
		case err != nil:
			if !f.down && f.onDown != nil {
				f.onDown(err)
			}
			f.down, f.downAt, f.downFor = true, now, fleetRetry
			if cacheerr.Transient(err) {
				f.downFor = time.Second
			}
			p.rate = min(p.rate, f.fallback)
			p.level = min(p.level, f.fallback*burstWindow.Seconds())
		case got > 0:
			if f.down && f.onDown != nil {
				f.onDown(nil)
			}
			if f.down && now.Sub(p.slowed) >= recoverIn {
				p.rate = p.budget // the fallback's limit is gone; a throttling reply's is not
			}
			f.down = false
			f.have, f.until = f.have+got, later(f.until, now.Add(hold+time.Duration(got/p.budget*float64(time.Second))))
			f.last = got
			if !first {
				f.place = 0
			}
		default:
			if f.place == 0 {
				f.reserved = want
			}
			f.place, f.retry, f.refused = next, now.Add(wait), now
		}
		close(p.changed)
		p.changed = make(chan struct{})
	}()
	return askWithin
}

// fleetDown says whether the fleet's budget could not be read at its last
// asking.
func (p *pacer) fleetDown() bool {
	if p == nil || p.fleet == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fleet.down
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
