package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/invalidator-go/invalidator/invalidate"
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
	// DeadlineMargin is how long before the context's deadline a batch stops
	// and reports what is unfinished as failed, so that a Lambda function
	// answers instead of timing out. Default 1 s, and never more than half
	// of the time left.
	DeadlineMargin time.Duration
}

// Worker processes batches; it is safe for concurrent use.
type Worker struct {
	inv  *invalidate.Invalidator
	opts Options
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
	return &Worker{inv: inv, opts: opts}
}

// Process decodes and invalidates a batch from source ("sqs", "sns",
// "dynamodb") before ctx's deadline less the margin, then logs the batch,
// each failed record, and the batch's metrics.
func (w *Worker) Process(ctx context.Context, source string, batch invalidate.Batch) (rep invalidate.Report) {
	start := time.Now()
	if deadline, ok := ctx.Deadline(); ok {
		margin := min(w.opts.DeadlineMargin, time.Until(deadline)/2)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-margin))
		defer cancel()
	}
	defer func() {
		// A bug must not lose the batch: every record fails and is retried.
		if p := recover(); p != nil {
			w.opts.Logger.Error("panic while processing a batch", "source", source, "panic", fmt.Sprint(p))
			rep = failAll(batch, fmt.Errorf("%w: %v", invalidate.ErrInternal, p))
		}
		w.log(source, rep, time.Since(start))
	}()
	return w.inv.Invalidate(ctx, batch)
}

// failAll fails every record of the batch, decoding each again for its ID.
func failAll(batch invalidate.Batch, err error) invalidate.Report {
	rep := invalidate.Report{Results: make([]invalidate.Result, batch.Len)}
	for i := range rep.Results {
		rep.Results[i] = invalidate.Result{Record: batch.Decode(i).ID, Err: err}
	}
	rep.Metrics.Records, rep.Metrics.Failed = batch.Len, batch.Len
	return rep
}

func (w *Worker) log(source string, rep invalidate.Report, took time.Duration) {
	m := rep.Metrics
	for _, res := range rep.Results {
		if res.Err != nil {
			w.opts.Logger.Warn("record failed", "source", source, "record", res.Record, "error", res.Err.Error())
		}
	}
	w.opts.Logger.Info("batch", "source", source, "records", m.Records, "failed", m.Failed,
		"keys_deleted", m.KeysDeleted, "keys_absent", m.KeysAbsent, "keys_failed", m.KeysFailed,
		"max_lag_ms", m.MaxLag.Milliseconds(), "duration_ms", took.Milliseconds())
	if err := writeEMF(w.opts.Metrics, w.opts.Namespace, w.opts.Name, source, m, time.Now()); err != nil {
		w.opts.Logger.Error("cannot write metrics", "error", err.Error())
	}
}
