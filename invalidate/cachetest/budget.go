package cachetest

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/internal/fleetbudget"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Budget is a fleet's ECPU budget in memory, kept as internal/fleetbudget
// keeps it in the cache: a theoretical arrival time that each grant moves
// on. Err, when set, is every Take's error.
type Budget struct {
	PerSecond float64
	mu        sync.Mutex
	err       error
	tat, q    time.Time
	calls     int
	granted   float64
}

// Take is invalidate.Budget's.
func (b *Budget) Take(_ context.Context, want float64, first bool, place int64) (float64, time.Duration, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.err != nil {
		return 0, 0, 0, b.err
	}
	now := time.Now()
	b.tat = later(b.tat, now)
	lead := b.tat.Sub(now)
	takes := time.Duration(want / b.PerSecond * float64(time.Second))
	if !first {
		q := later(b.q, b.tat)
		if limit := now.Add(fleetbudget.Queue); q.After(limit) {
			q = limit
		}
		fits := lead == 0 || lead+takes <= fleetbudget.Ahead
		if place > 0 {
			if turn := time.UnixMilli(place).Add(-fleetbudget.Ahead); turn.After(now) {
				return 0, turn.Sub(now), place, nil
			}
			fits = lead <= 2*fleetbudget.Ahead
		} else if q.After(b.tat) {
			fits = false
		}
		if !fits {
			b.q = q.Add(takes)
			return 0, max(q.Add(-fleetbudget.Ahead).Sub(now), time.Millisecond), max(q.UnixMilli(), 1), nil
		}
	}
	var wait time.Duration
	if first && lead > fleetbudget.Ahead+fleetbudget.Reserve {
		wait = lead - fleetbudget.Ahead - fleetbudget.Reserve
	}
	b.tat = b.tat.Add(takes)
	b.granted += want
	return want, wait, 0, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Fail makes every Take fail with err from now on; nil ends it.
func (b *Budget) Fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
}

// Counts are the Takes asked and the ECPUs granted so far.
func (b *Budget) Counts() (calls int, granted float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls, b.granted
}

// BudgetContract checks a fleet's budget of perSecond ECPUs a second that
// nothing else takes from: a first take is granted at once, however far
// the others ran ahead, and told to wait its turn beyond the reserve;
// others are refused unless they end within Ahead, with the wait until
// they may ask again from their place in the line, or a new place when
// the fleet ran ahead meanwhile;
// and what is granted within a time is the rate's, plus what may go at
// once.
func BudgetContract(t *testing.T, budget func(t *testing.T) invalidate.Budget, perSecond float64) {
	t.Run("a first take is granted at once", func(t *testing.T) {
		b := budget(t)
		got, wait, _, err := b.Take(t.Context(), 10, true, 0)
		if err != nil || got != 10 || wait != 0 {
			t.Fatalf("granted %g, wait %v, %v; want 10 at once", got, wait, err)
		}
	})
	t.Run("others are refused past Ahead, first deletes wait their turn", func(t *testing.T) {
		b := budget(t)
		ahead := perSecond * fleetbudget.Ahead.Seconds()
		if got, _, _, err := b.Take(t.Context(), 3*ahead, false, 0); err != nil || got != 3*ahead {
			t.Fatalf("an idle budget granted %g of %g (%v)", got, 3*ahead, err)
		}
		lead := 3 * fleetbudget.Ahead
		got, wait, _, err := b.Take(t.Context(), 1, false, 0)
		if want := lead - fleetbudget.Ahead; err != nil || got != 0 || wait < want-50*time.Millisecond || wait > want+50*time.Millisecond {
			t.Fatalf("a take 3 × Ahead behind was granted %g, told to wait %v (%v); want none, about %v", got, wait, err, want)
		}
		got, wait, _, err = b.Take(t.Context(), 1, true, 0)
		if want := max(lead-fleetbudget.Ahead-fleetbudget.Reserve, 0); err != nil || got != 1 || wait < want-50*time.Millisecond || wait > want+50*time.Millisecond {
			t.Fatalf("a first take 3 × Ahead behind was granted %g, told to wait %v (%v); want granted after %v: its turn less the reserve", got, wait, err, want)
		}
	})
	t.Run("a turn that comes while the fleet runs ahead goes to the line's end", func(t *testing.T) {
		b := budget(t)
		ahead := perSecond * fleetbudget.Ahead.Seconds()
		if got, _, _, err := b.Take(t.Context(), 2*ahead, false, 0); err != nil || got != 2*ahead {
			t.Fatalf("an idle budget granted %g of %g (%v)", got, 2*ahead, err)
		}
		_, wait, place, err := b.Take(t.Context(), ahead, false, 0)
		if err != nil || place == 0 {
			t.Fatalf("a take behind the fleet got place %d (%v); want one", place, err)
		}
		// First deletes move the fleet on while it waits its turn.
		if got, _, _, err := b.Take(t.Context(), 3*ahead, true, 0); err != nil || got != 3*ahead {
			t.Fatalf("a first take was granted %g of %g (%v)", got, 3*ahead, err)
		}
		time.Sleep(wait)
		got, wait, next, err := b.Take(t.Context(), ahead, false, place)
		if err != nil || got != 0 || next <= place || wait < fleetbudget.Ahead {
			t.Fatalf("at its turn, 4 × Ahead behind: granted %g, told to wait %v at place %d (was %d), %v; want none, a later place and its wait", got, wait, next, place, err)
		}
	})
	t.Run("what is granted is the rate's", func(t *testing.T) {
		b := budget(t)
		const d = time.Second
		want := perSecond / 50
		var granted float64
		var place int64
		start := time.Now()
		for time.Since(start) < d {
			got, wait, next, err := b.Take(t.Context(), want, false, place)
			if err != nil {
				t.Fatal(err)
			}
			granted, place = granted+got, next
			time.Sleep(max(wait, time.Millisecond))
		}
		most := perSecond*(time.Since(start)+fleetbudget.Ahead).Seconds() + want
		if granted > most || granted < perSecond*d.Seconds()*0.8 {
			t.Fatalf("%g ECPUs granted in %v at %g a second, want at most %g and near the rate", granted, time.Since(start), perSecond, math.Round(most))
		}
	})
}
