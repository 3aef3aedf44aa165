package invalidate

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"
)

// reach is what a batch may plan: the ECPUs that its Invalidator's budget
// gives before the batch's deadline, by the model of ecpu.go. A record
// that costs more than a whole attempt gives (Batch.Attempt) can never be
// done, and fails for good before any of its keys is sent, to be parked;
// one that costs more than the records before it left waits for the next
// attempt. So a batch never plans more than it can send — its keys never
// take the budget of the records behind it, nor the memory — and the first
// record of every attempt that fits one goes.
type reach struct {
	left, whole float64 // ECPUs; +Inf without a budget, a deadline, an Attempt
	budget      float64
	attempt     time.Duration
}

// errPastReach fails, for now, a record that the batch's records before
// it leave out of reach.
var errPastReach = errors.New("not attempted: the records before it in the batch spend the budget until the deadline")

// reach is the reach of a batch in that ends with ctx.
func (inv *Invalidator) reach(ctx context.Context, in Batch) reach {
	r := reach{left: math.Inf(1), whole: math.Inf(1), budget: inv.opts.ECPUPerSecond, attempt: in.Attempt}
	if r.budget <= 0 {
		return r
	}
	if deadline, ok := ctx.Deadline(); ok {
		r.left = r.budget * max(time.Until(deadline).Seconds(), 0)
	}
	if in.Attempt > 0 {
		r.whole = r.budget * in.Attempt.Seconds()
	}
	return r
}

// take makes way for a record's keys and tags, or says why it cannot.
// Its cost is a floor: a tag costs at least a page.
func (r *reach) take(keys, tags []string) error {
	if math.IsInf(r.left, 1) && math.IsInf(r.whole, 1) {
		return nil
	}
	ecpus := float64(len(tags))
	for _, k := range keys {
		ecpus += unlinkCost(k).ecpus
	}
	switch {
	case ecpus > r.whole:
		return &planError{Reason: "its " + strconv.Itoa(len(keys)) + " keys and " + strconv.Itoa(len(tags)) +
			" tags cost at least " + strconv.FormatFloat(ecpus, 'f', 0, 64) + " ECPUs, more than the " +
			strconv.FormatFloat(r.whole, 'f', 0, 64) + " that a budget of " + strconv.FormatFloat(r.budget, 'f', -1, 64) +
			" ECPUs a second gives in the " + r.attempt.Round(time.Millisecond).String() +
			" of an attempt: replay it with a larger --ecpu-per-second (0: no limit)"}
	case ecpus > r.left:
		return errPastReach
	}
	r.left -= ecpus
	return nil
}
