// Package wait pauses a goroutine for a while unless its context ends
// first: the pause between polls and retries of the loops that read
// queues and streams, how long it is (Backoff), and how much of a
// deadline a step may take (BeforeDeadline).
package wait

import (
	"context"
	"math/rand/v2"
	"time"
)

// For waits d, or until ctx ends; it reports whether the whole d passed.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Backoff is the pause before the attempt-th retry (from 1): base, doubled
// at each next attempt up to most, with equal jitter — uniform between
// half that and the whole of it, so that the loops that failed together
// do not all come back together, yet each still waits at least half its
// step. An attempt below 1 counts as the first; a base of 0 or less is no
// pause.
func Backoff(base, most time.Duration, attempt int) time.Duration {
	if base <= 0 || most <= 0 {
		return 0
	}
	d := min(base, most)
	for i := 1; i < attempt && d < most; i++ {
		if d > most/2 {
			d = most
			break
		}
		d *= 2
	}
	return d/2 + rand.N(d-d/2+1)
}

// BeforeDeadline is ctx ended margin before its deadline, or, when less
// than twice margin is left, halfway to it: a step that must be done
// before the deadline (answering, handing back what failed) keeps its
// margin, yet a deadline already near is not spent at once. Without a
// deadline it is ctx. Call cancel when the work is done.
func BeforeDeadline(ctx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, deadline.Add(-min(margin, time.Until(deadline)/2)))
}
