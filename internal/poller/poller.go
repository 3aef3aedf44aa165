package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SQS is what the poller needs of an SQS client; *sqs.Client has it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Processor invalidates a decoded batch; *worker.Worker is one.
type Processor interface {
	Process(ctx context.Context, source string, batch invalidate.Batch) invalidate.Report
}

// Options configure a poller. QueueURL is required; the rest have defaults.
type Options struct {
	// QueueURL is the queue to consume (QUEUE_URL). Required.
	QueueURL string
	// Receivers is how many receive loops run at once (POLLER_RECEIVERS).
	// Default 2.
	Receivers int
	// WaitTime is the long-polling wait of each receive. Default 20 s.
	WaitTime time.Duration
	// MaxMessages is the most messages one receive asks for (1-10). Default 10.
	MaxMessages int32
	// VisibilityTimeout is how long received messages stay hidden; while a
	// batch runs it is extended by as much every half of it
	// (POLLER_VISIBILITY_TIMEOUT). Default 30 s.
	VisibilityTimeout time.Duration
	// BatchTimeout bounds one batch's processing (POLLER_BATCH_TIMEOUT).
	// Default 60 s.
	BatchTimeout time.Duration
	// HealthAddr serves GET /healthz (HEALTH_ADDR, "off" turns it off).
	// Default ":8080"; empty in Options means off.
	HealthAddr string
	// Backoff is the first pause after SQS or the cache fails, doubled up
	// to MaxBackoff. Defaults 200 ms and 20 s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// OptionsFromEnv reads the poller's variables through getenv.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{QueueURL: getenv("QUEUE_URL"), HealthAddr: ":8080"}
	if o.QueueURL == "" {
		return o, errors.New("QUEUE_URL is required: the URL of the queue to consume")
	}
	switch v := getenv("HEALTH_ADDR"); v {
	case "":
	case "off":
		o.HealthAddr = ""
	default:
		o.HealthAddr = v
	}
	var err error
	if o.Receivers, err = intEnv(getenv, "POLLER_RECEIVERS", 2, 1, 100); err != nil {
		return o, err
	}
	if o.VisibilityTimeout, err = durationEnv(getenv, "POLLER_VISIBILITY_TIMEOUT", 30*time.Second); err != nil {
		return o, err
	}
	if o.BatchTimeout, err = durationEnv(getenv, "POLLER_BATCH_TIMEOUT", 60*time.Second); err != nil {
		return o, err
	}
	return o, nil
}

func intEnv(getenv func(string) string, key string, def, lo, hi int) (int, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: want a whole number from %d to %d", key, v, lo, hi)
	}
	return n, nil
}

func durationEnv(getenv func(string) string, key string, def time.Duration) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second || d > 12*time.Hour {
		return 0, fmt.Errorf("%s=%q: want a duration from 1s to 12h, like 30s", key, v)
	}
	return d, nil
}

func (o *Options) defaults() {
	if o.Receivers <= 0 {
		o.Receivers = 2
	}
	if o.WaitTime <= 0 {
		o.WaitTime = 20 * time.Second
	}
	if o.MaxMessages <= 0 || o.MaxMessages > 10 {
		o.MaxMessages = 10
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = 30 * time.Second
	}
	o.VisibilityTimeout = max(o.VisibilityTimeout, time.Second) // SQS counts in seconds
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = 60 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 20 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Run consumes the queue until ctx ends, then drains: no new receives, the
// batches in flight finish and their successes are deleted, and Run
// returns nil. It returns an error only when it cannot start.
func Run(ctx context.Context, client SQS, proc Processor, opts Options) error {
	opts.defaults()
	if opts.QueueURL == "" {
		return errors.New("poller: no queue URL")
	}
	p := &poller{client: client, proc: proc, opts: opts}
	stopHealth, err := p.serveHealth()
	if err != nil {
		return err
	}
	defer stopHealth()
	opts.Logger.Info("poller started", "queue", opts.QueueURL, "receivers", opts.Receivers, "health", opts.HealthAddr)
	var wg sync.WaitGroup
	for range opts.Receivers {
		wg.Go(func() { p.receive(ctx) })
	}
	<-ctx.Done()
	p.draining.Store(true)
	opts.Logger.Info("draining: finishing the batches in flight")
	wg.Wait()
	opts.Logger.Info("poller stopped")
	return nil
}

type poller struct {
	client   SQS
	proc     Processor
	opts     Options
	draining atomic.Bool
}

// receive is one receive loop.
func (p *poller) receive(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		out, err := p.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(p.opts.QueueURL),
			MaxNumberOfMessages:         p.opts.MaxMessages,
			WaitTimeSeconds:             int32(p.opts.WaitTime / time.Second),
			VisibilityTimeout:           int32(p.opts.VisibilityTimeout / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			p.opts.Logger.Warn("receive failed", "error", err.Error(), "retry_in_ms", p.sleep(ctx, failures).Milliseconds())
			continue
		}
		// A stop signal cancels a long poll in flight; SQS may have handed
		// out messages that are then not processed: they come back after
		// their visibility timeout, with one more receive counted.
		if len(out.Messages) == 0 {
			continue
		}
		// The batch finishes even when a stop signal arrives meanwhile.
		if p.handle(context.WithoutCancel(ctx), out.Messages) {
			failures = 0
		} else {
			failures++
			p.sleep(ctx, failures)
		}
	}
}

// handle processes one batch and deletes its successes. It reports false
// when the cache failed every record, so the loop backs off.
func (p *poller) handle(ctx context.Context, msgs []types.Message) bool {
	ctx, cancel := context.WithTimeout(ctx, p.opts.BatchTimeout)
	defer cancel()
	stopExtending := p.extendVisibility(ctx, msgs)
	batch := invalidate.Inputs(msgs, func(m *types.Message) invalidate.Record {
		id := aws.ToString(m.MessageId)
		changes, err := events.DecodeSQSBody(id, aws.ToString(m.Body), m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)])
		return invalidate.Record{ID: id, Changes: changes, Err: err}
	})
	rep := p.proc.Process(ctx, "sqs", batch)
	stopExtending()

	var done []types.DeleteMessageBatchRequestEntry
	cacheFailures := 0
	for i, res := range rep.Results {
		if res.Err == nil {
			done = append(done, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msgs[i].ReceiptHandle})
		} else if _, ok := errors.AsType[*invalidate.KeyError](res.Err); ok {
			cacheFailures++
		}
	}
	// The batch's own time may be spent: deleting gets time of its own, or
	// successes would come back and count toward the DLQ.
	deleteCtx, cancelDelete := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelDelete()
	p.delete(deleteCtx, done)
	return cacheFailures < len(msgs)
}

func (p *poller) delete(ctx context.Context, entries []types.DeleteMessageBatchRequestEntry) {
	if len(entries) == 0 {
		return
	}
	out, err := p.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.opts.QueueURL), Entries: entries})
	if err != nil {
		// The messages were invalidated; they come back and are
		// invalidated again, which is harmless.
		p.opts.Logger.Warn("delete failed: the messages will be redelivered", "messages", len(entries), "error", err.Error())
		return
	}
	for _, f := range out.Failed {
		p.opts.Logger.Warn("delete failed: the message will be redelivered", "entry", aws.ToString(f.Id), "error", aws.ToString(f.Message))
	}
}

// extendVisibility keeps a slow batch's messages hidden until it ends.
func (p *poller) extendVisibility(ctx context.Context, msgs []types.Message) (stop func()) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle,
			VisibilityTimeout: int32(p.opts.VisibilityTimeout / time.Second),
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(p.opts.VisibilityTimeout / 2)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_, err := p.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{
					QueueUrl: aws.String(p.opts.QueueURL), Entries: entries,
				})
				if err != nil && ctx.Err() == nil {
					p.opts.Logger.Warn("visibility extension failed", "messages", len(entries), "error", err.Error())
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// sleep pauses before the next try, exponential with jitter, and returns
// the pause; it ends early when ctx does.
func (p *poller) sleep(ctx context.Context, failures int) time.Duration {
	d := min(p.opts.Backoff<<min(failures-1, 16), p.opts.MaxBackoff)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return d
}

// serveHealth answers GET /healthz: 200 while consuming, 503 while draining.
func (p *poller) serveHealth() (stop func(), err error) {
	if p.opts.HealthAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", p.opts.HealthAddr)
	if err != nil {
		return nil, fmt.Errorf("health endpoint on %s: %w", p.opts.HealthAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if p.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}
