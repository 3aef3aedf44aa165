package poller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// Handler invalidates a batch, parks what failed for good and hands back
// what is to retry, reporting each record, and says whether the cache
// answers at all; *worker.Worker is one.
type Handler interface {
	Handle(ctx context.Context, source events.Source, batch invalidate.Batch, delivered func(i int) (events.Delivery, []byte)) worker.Outcome
	Probe(ctx context.Context) error
}

// Run consumes the queue until ctx ends, then drains: no new receives, the
// messages of receives in flight are handed back, the batches in flight
// finish and their successes are deleted, and Run returns nil. It returns
// an error only when it cannot start.
func Run(ctx context.Context, client queues.SQS, handler Handler, opts Options) error {
	opts.defaults()
	if opts.QueueURL == "" {
		return errors.New("poller: no queue URL")
	}
	p := &poller{client: client, handler: handler, opts: opts, gate: newGate(handler.Probe, opts.Logger), arn: queueARN(opts.QueueURL, opts.Region)}
	stopHealth, err := p.serveHealth()
	if err != nil {
		return err
	}
	defer stopHealth()
	opts.Logger.Info("poller started", "queue", opts.QueueURL, "receivers", opts.Receivers, "max_receivers", opts.MaxReceivers, "health", opts.HealthAddr)
	p.loops.Store(int32(opts.Receivers))
	for range opts.Receivers {
		p.wg.Go(func() { p.receive(ctx, true) })
	}
	if opts.StatsEvery > 0 {
		p.wg.Go(func() { logStats(ctx, opts.Logger, opts.StatsEvery) })
	}
	<-ctx.Done()
	p.draining.Store(true)
	opts.Logger.Info("draining: finishing the batches in flight")
	p.wg.Wait()
	opts.Logger.Info("poller stopped")
	return nil
}

type poller struct {
	client   queues.SQS
	handler  Handler
	opts     Options
	gate     *gate
	arn      string // the queue's, which what it parks names
	draining atomic.Bool
	loops    atomic.Int32 // receive loops running
	wg       sync.WaitGroup
}

// receive is one receive loop; one not steady ends at a receive that is not
// full, its messages handled first.
func (p *poller) receive(ctx context.Context, steady bool) {
	failures := 0
	for p.gate.pass(ctx) {
		msgs, requestID, err := p.receiveOnce(ctx)
		if err == nil && len(msgs) == int(p.opts.MaxMessages) {
			p.scale(ctx)
		}
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			failures++
			p.opts.Logger.Warn("receive failed", "error", err.Error(), "retry_in_ms", p.sleep(ctx, failures).Milliseconds())
		case ctx.Err() != nil:
			// The stop signal came during the long poll: these messages
			// were not started, and go back to the queue at once.
			if err := p.handBack(msgs, func(queues.Message) time.Duration { return 0 }); err != nil {
				p.opts.Logger.Warn("cannot hand back the messages received while stopping: they come back after their visibility timeout", "error", err.Error())
			}
			return
		case len(msgs) == 0:
			failures = 0
		default:
			failures = 0
			// A batch held past heldBatch (its keys on a node that is down,
			// retried for RetryFor) lets another loop receive meanwhile: the
			// changes behind it must not wait for that node.
			scaled := make(chan struct{})
			held := time.AfterFunc(heldBatch, func() { defer close(scaled); p.scale(ctx) })
			// The batch finishes even when a stop signal arrives meanwhile.
			p.gate.saw(ctx, p.handle(worker.WithInvocation(context.WithoutCancel(ctx), worker.Invocation{RequestID: requestID}), msgs))
			if !held.Stop() {
				<-scaled // a loop started while this one still counts: Run waits for it
			}
		}
		if err == nil && len(msgs) < int(p.opts.MaxMessages) && !steady {
			p.loops.Add(-1) // the backlog is done
			return
		}
	}
}

// heldBatch is how long a batch runs before the loop that holds it counts
// as busy, and another may receive: several times a healthy batch's
// milliseconds, well inside the lag a change may take.
const heldBatch = 250 * time.Millisecond

// scale starts one more receive loop, while there are fewer than
// MaxReceivers: after a full receive, a backlog waits in the queue; after
// a batch held, the changes behind it would.
func (p *poller) scale(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	for n := p.loops.Load(); n < int32(p.opts.MaxReceivers); n = p.loops.Load() {
		if p.loops.CompareAndSwap(n, n+1) {
			p.wg.Go(func() { p.receive(ctx, false) })
			return
		}
	}
}

// receiveOnce long-polls the queue. A stop signal does not cut the poll
// short: SQS may already have handed out messages that only its answer
// names, and they must be handed back, not left hidden until their
// visibility timeout.
// The receive's request ID names the batch in its log lines and in what
// it parks, as an invoke's does a function's.
func (p *poller) receiveOnce(ctx context.Context) (msgs []queues.Message, requestID string, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.WaitTime+10*time.Second)
	defer cancel()
	return queues.Receive(ctx, p.client, p.opts.QueueURL, p.opts.MaxMessages, p.opts.WaitTime, p.opts.VisibilityTimeout)
}

// handle processes one batch: its successes and what was parked are
// deleted, what failed for now comes back after a backoff. It tells
// whether the batch showed the cache up (a record done) or down (every
// record failed for now).
func (p *poller) handle(ctx context.Context, msgs []queues.Message) cacheState {
	ctx, cancel := context.WithTimeout(ctx, p.opts.BatchTimeout)
	defer cancel()
	stopExtending := p.extendVisibility(ctx, msgs)
	received := make([]message, len(msgs))
	for i := range msgs {
		received[i].Message = &msgs[i]
	}
	batch := invalidate.Inputs(received, func(m *message) invalidate.Record {
		d, changes, err := events.DecodeReceived(m.ID, m.Body, m.SentTimestamp, p.arn, events.Receipt{Handle: m.Handle, Receives: m.Receives})
		m.delivery = d
		return invalidate.Record{ID: d.ID, Changes: changes, Err: err}
	})
	// The worker hands back what is to retry as its last step, as it does
	// a function's: an extension that came after it (one tick in half a
	// visibility timeout, in the moments before it stops) would only bring
	// those messages back later.
	out := p.handler.Handle(ctx, events.SourceSQS, batch, func(i int) (events.Delivery, []byte) { return received[i].delivery, nil })
	stopExtending()

	var done []string
	state, transient := none, 0
	for i, r := range out.Records {
		switch r.Fate {
		case worker.Retry:
			if r.Transient {
				transient++
			}
			continue
		case worker.Done:
			state = up
		}
		done = append(done, msgs[i].Handle)
	}
	if transient == len(msgs) {
		state = down
	}
	p.delete(done)
	return state
}

// message is a received message, and its delivery once decoded.
type message struct {
	*queues.Message
	delivery events.Delivery
}

// sleep pauses before the next try (wait.Backoff), and returns the pause;
// it ends early when ctx does.
func (p *poller) sleep(ctx context.Context, failures int) time.Duration {
	d := wait.Backoff(p.opts.Backoff, p.opts.MaxBackoff, failures)
	wait.For(ctx, d)
	return d
}
