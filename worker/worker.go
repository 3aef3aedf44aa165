package worker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// Options tune a Worker. The zero value gives the defaults.
type Options struct {
	// Name is the function or service, the Function dimension of the
	// metrics. Default "invalidator".
	Name string
	// Logger receives one line per batch and one per failed record. Default
	// slog.Default().
	Logger *slog.Logger
	// Metrics receives one Embedded Metric Format line per batch. Default
	// os.Stdout, where Lambda and the CloudWatch agent pick it up.
	Metrics io.Writer
	// Namespace is the CloudWatch namespace of the metrics. Default
	// "Invalidator".
	Namespace string
	// RetryFor is how long the keys of an SQS batch that fail for now are
	// retried before their records go back to their queue, which tries them
	// again soon: the records behind them wait no longer, and a node that is
	// down holds back only its own keys. The keys of any other batch are
	// retried until its deadline: a stream's shard (DynamoDB, Kinesis,
	// Kafka) waits for its first failed record whatever is answered, and
	// Lambda pauses before it tries the shard again, while an SNS invoke
	// comes back minutes later. Default 1 s.
	RetryFor time.Duration
	// DeadlineMargin is how long before the context's deadline a batch stops
	// trying its keys, to park what failed for good, hand back what is
	// unfinished and answer, so that a Lambda function answers instead of
	// timing out. Default 1 s, and never more than half of the time left.
	DeadlineMargin time.Duration
	// Park receives the records that fail for good. Default none: they are
	// handed back to their source like those that fail for now.
	Park Parker
	// Queues hands the SQS messages that fail for now back to their queue,
	// to come back after a backoff (SQS function only). Default none: they
	// come back after the queue's visibility timeout.
	Queues queues.SQS
	// SecondDelete deletes the keys of every record done a second time,
	// later. A record whose keys it cannot schedule fails for now. Default
	// none: one delete.
	SecondDelete SecondDeleter
	// Window receives what every batch deleted, and is read and deleted
	// again at the end of a batch after a sign of a failover. Default none.
	Window *Window
	// Announce publishes what each batch deleted to the services' local
	// tiers (writethrough/near), once it is deleted. Default none.
	Announce *announce.Publisher
}

// Parker sends records that failed for good to the failure queue and says
// which could not be sent; failurequeue.Queue is one.
type Parker interface {
	Park(ctx context.Context, records []failurequeue.Record) []error
}

// Worker processes batches; it is safe for concurrent use.
type Worker struct {
	inv       *invalidate.Invalidator
	opts      Options
	conn      *connection // nil when the caller gave the invalidator
	heartbeat *heartbeat  // nil when none is sent
	signs     *signs      // of a failover, since the last batch took one
}

// New returns a Worker invalidating through inv.
func New(inv *invalidate.Invalidator, opts Options) *Worker {
	if opts.Name == "" {
		opts.Name = "invalidator"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = os.Stdout
	}
	if opts.Namespace == "" {
		opts.Namespace = "Invalidator"
	}
	if opts.DeadlineMargin <= 0 {
		opts.DeadlineMargin = time.Second
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = time.Second
	}
	return &Worker{inv: inv, opts: opts, signs: newSigns()}
}

// Rules are the rules the worker plans with.
func (w *Worker) Rules() *invalidate.Rules { return w.inv.Rules() }

// Close stops the heartbeats and ends the worker's own cache connection,
// if Start made them.
func (w *Worker) Close() {
	if w.heartbeat != nil {
		w.heartbeat.close()
	}
	if w.conn != nil {
		w.conn.close()
	}
}

// Lambda handles an invoke of a Lambda function from source — an SQS
// queue, an SNS topic or a DynamoDB stream — from its raw payload, parsed
// once (events.SplitRecords): decoding it into types with encoding/json
// would cost several times all the rest, and a 10,000-record stream batch
// stays within a 128 MB function. The outcome tells each record's fate. A
// payload that is not an event of its source at all is an error.
func (w *Worker) Lambda(ctx context.Context, source events.Source, payload []byte) (Outcome, error) {
	raws, err := events.SplitRecords(payload)
	if err != nil {
		return Outcome{}, err
	}
	records := make([]record, len(raws))
	for i, raw := range raws {
		records[i].raw = raw
	}
	keep := w.inv.Rules().Attributes()
	batch := invalidate.Inputs(records, func(r *record) invalidate.Record {
		d, changes, err := events.Decode(source, r.raw, keep)
		r.delivery = d
		return invalidate.Record{ID: d.ID, Changes: changes, Err: err}
	})
	if source == events.SourceKinesis {
		batch = joinSplit(batch, raws)
	}
	return w.Handle(ctx, source, batch, func(i int) (events.Delivery, []byte) { return records[i].delivery, raws[i] }), nil
}

// record is a raw record of an invoke, and its delivery once decoded.
type record struct {
	raw      []byte
	delivery events.Delivery
}

// Handle invalidates a batch from source before ctx's deadline less the
// margin, and then, each a step of its own: announces what it deleted,
// schedules it to be deleted again (second deletes, the failover schedule,
// the window), deletes the window again after a sign of a failover, parks
// the records that failed for good, and hands the SQS messages to retry
// back to their queue, to come back after a backoff that grows with their
// receive count (with Queues; else after the queue's visibility timeout)
// — delivered(i) is record i's delivery, its receipt included, and, when
// its event had one, its raw record; without delivered nothing is parked
// or handed back. It logs the batch, each failed record and the batch's
// metrics, and returns the outcome: each record done, to retry, or
// parked; the front end deletes what is not to retry, or has it deleted.
//
// A stream shard is retried from its lowest failed record, so the records
// after it come again whatever is answered: in a batch from DynamoDB
// Streams, a record after the first one to retry is retried, not parked,
// or it would be parked twice.
func (w *Worker) Handle(ctx context.Context, source events.Source, batch invalidate.Batch, delivered func(i int) (events.Delivery, []byte)) Outcome {
	start := time.Now()
	if source == events.SourceSQS {
		batch.RetryFor = w.opts.RetryFor
	}
	inTime, cancel := wait.BeforeDeadline(ctx, w.opts.DeadlineMargin)
	defer cancel()
	if deadline, ok := inTime.Deadline(); ok {
		batch.Attempt = time.Until(deadline) // each attempt's, as its source gives it again
	}
	out := outcomeOf(w.invalidate(inTime, source, batch))
	deleted := time.Now()
	// The announcement and the schedules finish the invalidation, and the
	// deletes may have spent all of their time retrying the keys of a node
	// that is down: they have until half of the margin, and parking and the
	// front end's answer the rest.
	announceIn, cancelAnnounce := wait.BeforeDeadline(ctx, w.opts.DeadlineMargin/2)
	defer cancelAnnounce()
	announced := w.announce(announceIn, &out, start, batch.RetryFor)
	later := w.scheduleAgain(announceIn, &out)
	signed := w.afterSign(inTime)
	w.parkFailed(ctx, source, &out, delivered)
	if source == events.SourceSQS && delivered != nil {
		w.handBack(ctx, out, delivered)
	}
	st := stagesOf(start, deleted, time.Now(), out.Report.Metrics, announced.took)
	w.log(ctx, source, out, later, append(scheduledAgain(out.Report), signed), announced, st)
	return out
}

// invalidate invalidates the batch; a bug caught fails every record for
// good.
func (w *Worker) invalidate(ctx context.Context, source events.Source, batch invalidate.Batch) (rep invalidate.Report) {
	defer func() {
		// A bug must not lose the batch: every record fails for good, and
		// is parked with the panic and its stack.
		if p := recover(); p != nil {
			err := invalidate.PanicError("processing a batch", p)
			w.opts.Logger.ErrorContext(ctx, "panic", "source", source, "error", err.Error())
			rep = failAll(batch, err)
		}
	}()
	return w.inv.Invalidate(ctx, batch)
}

// parkFailed parks the records that failed for good, when the worker has
// a failure queue and deliveries; in a stream's batch only those before the
// first record to retry, in order, ten at a time: one that cannot be
// parked is retried, and every one after it comes again with it.
func (w *Worker) parkFailed(ctx context.Context, source events.Source, o *Outcome, delivered func(int) (events.Delivery, []byte)) {
	if w.opts.Park == nil || delivered == nil {
		return
	}
	var park []int
	for i := range o.Records {
		res := &o.Records[i]
		if res.Err == nil {
			continue
		}
		if res.Transient {
			if source.Stream() {
				break
			}
			continue
		}
		park = append(park, i)
	}
	if !source.Stream() {
		w.park(ctx, source, o.Records, park, delivered)
		return
	}
	for len(park) > 0 && w.park(ctx, source, o.Records, park[:min(10, len(park))], delivered) {
		park = park[min(10, len(park)):]
	}
}

// park sends the records at indices idx to the failure queue and makes
// the fate of those sent Parked. It reports whether all were sent.
func (w *Worker) park(ctx context.Context, source events.Source, records []RecordOutcome, idx []int, delivered func(int) (events.Delivery, []byte)) (all bool) {
	if len(idx) == 0 {
		return true
	}
	all = true
	now := time.Now()
	parked := make([]failurequeue.Record, len(idx))
	requestID := invocationOf(ctx).RequestID
	for j, i := range idx {
		d, raw := delivered(i)
		parked[j] = failurequeue.New(source, w.opts.Name, d, records[i].Err.Error(), raw, now)
		parked[j].RequestID = requestID
	}
	for j, err := range w.opts.Park.Park(ctx, parked) {
		if err == nil {
			records[idx[j]].Fate = Parked
			continue
		}
		all = false
		w.opts.Logger.ErrorContext(ctx, "cannot park a record: it is handed back to its source", "source", source,
			"record", records[idx[j]].ID, "error", err.Error())
	}
	return all
}

// failAll fails every record of the batch for good, decoding each again for
// its ID.
func failAll(batch invalidate.Batch, err error) invalidate.Report {
	rep := invalidate.Report{Results: make([]invalidate.Result, batch.Len)}
	for i := range rep.Results {
		rep.Results[i] = invalidate.Result{Record: batch.Decode(i).ID, Err: err}
	}
	rep.Metrics.Records, rep.Metrics.Failed = batch.Len, batch.Len
	return rep
}

func (w *Worker) log(ctx context.Context, source events.Source, o Outcome, later scheduled, agains []again, announced announcements, st stages) {
	m := o.metrics()
	parked := 0
	debug := w.opts.Logger.Enabled(ctx, slog.LevelDebug)
	for i, res := range o.Report.Results {
		switch r := o.Records[i]; {
		case r.Err != nil:
			if r.Fate == Parked {
				parked++
			}
			w.opts.Logger.WarnContext(ctx, "record failed", "source", source, "record", r.ID, "fate", r.Fate.String(), "error", r.Err.Error())
		case debug:
			keys := make([]string, len(res.Keys))
			for k := range res.Keys {
				keys[k] = res.Keys[k].Key
			}
			attrs := []any{"source", source, "record", res.Record, "keys", keys, st.attr()}
			if len(res.Tags) > 0 {
				tags := make([]string, len(res.Tags))
				for t := range res.Tags {
					tags[t] = res.Tags[t].Tag
				}
				attrs = append(attrs, "tags", tags)
			}
			w.opts.Logger.DebugContext(ctx, "record invalidated", attrs...)
		}
	}
	announcing := w.opts.Announce != nil
	figs := append(figures(m, parked, later, announced, announcing), st.figures(announcing)...)
	attrs := make([]any, 0, 2*len(figs)+10)
	attrs = append(attrs, "source", source)
	for _, f := range figs {
		attrs = append(attrs, f.field, f.value)
	}
	for _, a := range agains {
		for _, f := range a.figures() {
			attrs = append(attrs, f.field, f.value)
		}
	}
	w.opts.Logger.InfoContext(ctx, "batch", append(attrs, "duration_ms", time.Since(st.started).Milliseconds())...)
	requestID, now := invocationOf(ctx).RequestID, time.Now()
	err := writeEMF(w.opts.Metrics, w.opts.Namespace, w.opts.Name, requestID, source, "", figs, now)
	for _, a := range agains {
		if figs := a.figures(); figs != nil && err == nil {
			err = writeEMF(w.opts.Metrics, w.opts.Namespace, w.opts.Name, requestID, source, a.cause, figs, now)
		}
	}
	if err != nil {
		w.opts.Logger.ErrorContext(ctx, "cannot write metrics", "error", err.Error())
	}
}
