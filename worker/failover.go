package worker

import (
	"context"
	"errors"
	"time"

	"github.com/invalidator-go/invalidator/invalidate"
)

// afterSign looks for a sign of a failover — asking the cluster's
// topology, at most once a second — and, when one came since the last
// batch, or the pass that follows the last sign's is due, reads the
// failover window and deletes all of it again, a round at a time, at the
// second deletes' priority, until the pass has read all it can, the
// batch's turn (windowTurn) is over, or ctx ends: every call of it, the
// window shown again included, ends with the turn, so that the batch's
// answer has the rest of the invoke. What fails for now is shown again in
// the window, and the pass kept for the next batch, which goes on with the
// rest. A Lambda function does it within the invoke that saw the sign,
// before it may be frozen.
func (w *Worker) afterSign(ctx context.Context) (n again) {
	n.cause = causeFailover
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, windowTurn)
	defer cancel()
	if w.conn != nil {
		w.conn.checkTopology(ctx)
	}
	p := w.signs.take(time.Now())
	if p == nil {
		return n
	}
	if w.opts.Window == nil {
		w.opts.Logger.WarnContext(ctx, "a sign of a failover, and no window to delete again: the failover schedule deletes again what it lost", "sign", p.cause)
		return n
	}
	messages := 0
	var reading time.Duration
	var retry, lost error
	for {
		read := time.Now()
		msgs, done, err := w.opts.Window.read(ctx, p)
		reading += time.Since(read)
		messages += len(msgs)
		var again []windowMessage
		if len(msgs) > 0 {
			again, lost = w.redeleteWindow(ctx, msgs, &n, lost)
		}
		if len(again) > 0 {
			// Shown again within the turn, or, once it is over, windowHide
			// after the read; the pass reads its slots again from the first.
			retry = errors.Join(w.opts.Window.show(ctx, again), errRedeleteRetry)
			for _, m := range again {
				delete(p.seen, m.id)
			}
			p.back = 0
		}
		if err != nil {
			retry = err
		}
		if retry != nil || done {
			break
		}
		if len(p.seen) >= maxPassMessages {
			lost = errPassFull
			break
		}
		if time.Since(began) > windowTurn/2 { // for a round to end within the turn
			retry = errWindowLeft // the next batch goes on
			break
		}
	}
	attrs := []any{"sign", p.cause, "follow_up", p.followUp, "messages", messages, "deleted_again", n.keys, "tags", n.tags,
		"refills", n.refills, "read_ms", reading.Milliseconds(), "took_ms", time.Since(began).Milliseconds()}
	switch {
	case retry != nil:
		w.signs.again(p)
		attrs = append(attrs, "error", retry.Error(), "fate", "retry")
	case lost != nil:
		attrs = append(attrs, "error", lost.Error(), "fate", "failed for good")
	}
	w.signs.followAfter(p, time.Now())
	w.opts.Logger.WarnContext(ctx, "keys deleted again after a sign of a failover", attrs...)
	return n
}

// errPassFull says that a pass read as many messages as it may.
var errPassFull = errors.New("the window holds more than a pass reads: the failover schedule deletes the rest again")

// errRedeleteRetry says that some of the window failed for now: shown
// again, for the next batch.
var errRedeleteRetry = errors.New("some of the window failed for now")

// windowTurn is how long one batch deletes the window again, at most,
// from asking the topology to showing again what failed; a round begins
// only in its first half. The batch's own answer waits meanwhile — and,
// for a stream, its shard, and for a function the next batch its mapping
// would give it —, and the other processes that saw the sign read the rest
// meanwhile.
const windowTurn = time.Second

// windowRetryFor is how long a round retries the keys that fail for now:
// a node not back yet (the failover still under way, a restarted node
// loading its data) would hold the batch; its keys are shown again, for
// the next batch.
const windowRetryFor = 100 * time.Millisecond

// errWindowLeft says that the batch's turn ended with the window not
// empty: the next batch goes on with it.
var errWindowLeft = errors.New("the window is not empty yet")

// redeleteWindow deletes again what msgs hold, one record a message, and
// announces it; it counts what it did in n and returns the messages that
// failed for now, and the last error of one that failed for good (NOPERM
// since an ACL change, WRONGTYPE at a tag key), which would fail the same
// way again: it is logged, and the rest goes on.
func (w *Worker) redeleteWindow(ctx context.Context, msgs []windowMessage, n *again, lost error) ([]windowMessage, error) {
	records := make([]invalidate.Record, len(msgs))
	for i, m := range msgs {
		records[i] = invalidate.Record{ID: "window", Changes: m.changes}
	}
	batch := invalidate.Decoded(records)
	batch.RetryFor = windowRetryFor
	out := outcomeOf(w.inv.Invalidate(ctx, batch))
	w.announce(ctx, &out, time.Now(), batch.RetryFor)
	var again []windowMessage
	for i, res := range out.Records {
		n.add(&out.Report.Results[i])
		switch {
		case res.Err == nil:
		case res.Transient:
			again = append(again, msgs[i])
		default:
			lost = res.Err
		}
	}
	return again, lost
}
