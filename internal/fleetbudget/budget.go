package fleetbudget

import (
	"context"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// Budget is the budget of PerSecond ECPUs a second at its two keys
// (Keys): it takes from the first, and while the first cannot be reached
// for now (its node failing over) from the second, for a while: a failover
// of one node leaves the fleet its budget, not only its fallback share.
// One Budget serves one process: it remembers which line its place is in.
type Budget struct {
	PerSecond float64
	keys      [2]string
	mu        sync.Mutex
	on        int       // the key taken from
	left      time.Time // when the first key was last left
	line      int       // the key whose line the last place is in
}

// BackAfter is how long a process takes from the second key after the
// first failed it: the processes that left the first key together go
// back about together, and the fleet is split between two budgets, each
// of the whole rate, only that long after a failover.
const BackAfter = 10 * time.Second

// New is the budget of perSecond ECPUs a second, at its Keys.
func New(perSecond float64) *Budget {
	return &Budget{PerSecond: perSecond, keys: Keys(perSecond)}
}

// Take is the package's Take at the key the budget is on: when it fails
// for now, its node out of reach, the other key is asked at once, within
// what is left of ctx (the first has half of it: a node that does not
// answer takes all it is given).
func (b *Budget) Take(ctx context.Context, c Client, want float64, first bool, place int64, reserve time.Duration) (got float64, wait time.Duration, next int64, err error) {
	b.mu.Lock()
	on := b.on
	if on == 1 && time.Since(b.left) >= BackAfter {
		on = 0
	}
	if b.line != on {
		place = 0 // a place in the other key's line means nothing here
	}
	b.mu.Unlock()
	half, cancel := ctx, context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		half, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/2))
	}
	got, wait, next, err = Take(half, c, b.keys[on], b.PerSecond, want, first, place, reserve)
	cancel()
	// Not when throttled: the cache is busy, not the node out of reach, and
	// the processes that moved would take a second rate from the other key.
	left := false
	if err != nil && cacheerr.Transient(err) && !cacheerr.Throttled(err) && ctx.Err() == nil {
		if got, wait, next, err = Take(ctx, c, b.keys[1-on], b.PerSecond, want, first, 0, reserve); err == nil {
			on, left = 1-on, on == 0
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if left {
		b.left = time.Now()
	}
	if err == nil {
		b.on, b.line = on, on
	}
	return got, wait, next, err
}
