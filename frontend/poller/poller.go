package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/frontend/worker"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SQS is what the poller needs of an SQS client; *sqs.Client has it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Handler invalidates a batch, parks what failed for good and tells each
// record's fate, and says whether the cache answers at all; *worker.Worker
// is one.
type Handler interface {
	Handle(ctx context.Context, source events.Source, batch invalidate.Batch, content func(i int) []byte) (invalidate.Report, []worker.Fate)
	Probe(ctx context.Context) error
}

// Options configure a poller. QueueURL is required; the rest have defaults.
type Options struct {
	// QueueURL is the queue to consume (QUEUE_URL). Required.
	QueueURL string
	// Receivers is how many receive loops run at once (POLLER_RECEIVERS).
	// Default 2.
	Receivers int
	// WaitTime is the long-polling wait of each receive (POLLER_WAIT_TIME,
	// 1-20 s). A stop signal lets the receives in flight end, so that the
	// messages they bring are handed back rather than left hidden: stopping
	// takes up to this long, plus the batches in flight. Default 20 s.
	WaitTime time.Duration
	// MaxMessages is the most messages one receive asks for, and so one
	// batch holds (POLLER_MAX_MESSAGES, 1-10). Default 10.
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
	// Backoff is the first pause after SQS fails, doubled up to
	// MaxBackoff. Defaults 200 ms and 20 s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// OptionsFromEnv reads the poller's variables through getenv.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{QueueURL: getenv("QUEUE_URL"), HealthAddr: healthAddr(getenv)}
	if o.QueueURL == "" {
		return o, errors.New("QUEUE_URL is required: the URL of the queue to consume")
	}
	var err error
	if o.Receivers, err = intEnv(getenv, "POLLER_RECEIVERS", 2, 1, 100); err != nil {
		return o, err
	}
	most, err := intEnv(getenv, "POLLER_MAX_MESSAGES", 10, 1, 10)
	if err != nil {
		return o, err
	}
	o.MaxMessages = int32(most)
	if o.VisibilityTimeout, err = durationEnv(getenv, "POLLER_VISIBILITY_TIMEOUT", 30*time.Second); err != nil {
		return o, err
	}
	if o.BatchTimeout, err = durationEnv(getenv, "POLLER_BATCH_TIMEOUT", 60*time.Second); err != nil {
		return o, err
	}
	if o.WaitTime, err = durationEnv(getenv, "POLLER_WAIT_TIME", 20*time.Second); err == nil && o.WaitTime > 20*time.Second {
		err = fmt.Errorf("POLLER_WAIT_TIME=%q: want 1s to 20s, SQS's longest poll", getenv("POLLER_WAIT_TIME"))
	}
	return o, err
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
	if o.WaitTime <= 0 || o.WaitTime > 20*time.Second {
		o.WaitTime = 20 * time.Second
	}
	o.WaitTime = max(o.WaitTime, time.Second) // less would be short polling, a busy loop
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
// messages of receives in flight are handed back, the batches in flight
// finish and their successes are deleted, and Run returns nil. It returns
// an error only when it cannot start.
func Run(ctx context.Context, client SQS, handler Handler, opts Options) error {
	opts.defaults()
	if opts.QueueURL == "" {
		return errors.New("poller: no queue URL")
	}
	p := &poller{client: client, handler: handler, opts: opts, breaker: newBreaker(handler.Probe, opts.Logger)}
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
	handler  Handler
	opts     Options
	breaker  *breaker
	draining atomic.Bool
}

// receive is one receive loop.
func (p *poller) receive(ctx context.Context) {
	failures := 0
	for p.breaker.acquire(ctx) {
		msgs, err := p.receiveOnce(ctx)
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
			if err := p.changeVisibility(msgs, func(types.Message) time.Duration { return 0 }); err != nil {
				p.opts.Logger.Warn("cannot hand back the messages received while stopping: they come back after their visibility timeout", "error", err.Error())
			}
			return
		case len(msgs) == 0:
			failures = 0
		default:
			failures = 0
			// The batch finishes even when a stop signal arrives meanwhile.
			p.breaker.saw(ctx, p.handle(context.WithoutCancel(ctx), msgs))
		}
	}
}

// receiveOnce long-polls the queue. A stop signal does not cut the poll
// short: SQS may already have handed out messages that only its answer
// names, and they must be handed back, not left hidden until their
// visibility timeout.
func (p *poller) receiveOnce(ctx context.Context) ([]types.Message, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.WaitTime+10*time.Second)
	defer cancel()
	out, err := p.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(p.opts.QueueURL),
		MaxNumberOfMessages: p.opts.MaxMessages,
		WaitTimeSeconds:     int32(p.opts.WaitTime / time.Second),
		VisibilityTimeout:   int32(p.opts.VisibilityTimeout / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// handle processes one batch: its successes and what was parked are
// deleted, what failed for now comes back after a backoff. It tells
// whether the batch showed the cache up (a record done) or down (every
// record failed for now).
func (p *poller) handle(ctx context.Context, msgs []types.Message) cacheState {
	ctx, cancel := context.WithTimeout(ctx, p.opts.BatchTimeout)
	defer cancel()
	stopExtending := p.extendVisibility(ctx, msgs)
	batch := invalidate.Inputs(msgs, func(m *types.Message) invalidate.Record {
		id := aws.ToString(m.MessageId)
		changes, err := events.DecodeSQSBody(id, aws.ToString(m.Body), m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)])
		return invalidate.Record{ID: id, Changes: changes, Err: err}
	})
	rep, fates := p.handler.Handle(ctx, events.SourceSQS, batch, func(i int) []byte { return lambdaRecord(&msgs[i]) })
	stopExtending()

	var done []types.DeleteMessageBatchRequestEntry
	var retry []types.Message
	state, transient := none, 0
	for i, fate := range fates {
		switch fate {
		case worker.Done:
			state = up
			fallthrough
		case worker.Parked:
			done = append(done, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msgs[i].ReceiptHandle})
		default:
			retry = append(retry, msgs[i])
			if rep.Results[i].Transient {
				transient++
			}
		}
	}
	if transient == len(msgs) {
		state = down
	}
	p.delete(done)
	most := 0
	err := p.changeVisibility(retry, func(m types.Message) time.Duration {
		n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		most = max(most, n)
		return worker.RetryAfter(n)
	})
	if len(retry) > 0 {
		worker.LogHandBack(ctx, p.opts.Logger, len(retry), most)
	}
	if err != nil {
		p.opts.Logger.Warn("cannot hand failed messages back: they come back after their visibility timeout", "error", err.Error())
	}
	return state
}

// lambdaRecord is a received message in the shape Lambda delivers it, the
// form the failure queue keeps SQS messages in.
func lambdaRecord(m *types.Message) []byte {
	rec, _ := json.Marshal(struct {
		MessageID     string            `json:"messageId"`
		ReceiptHandle string            `json:"receiptHandle"`
		Body          string            `json:"body"`
		Attributes    map[string]string `json:"attributes"`
		MD5OfBody     string            `json:"md5OfBody"`
		EventSource   string            `json:"eventSource"`
	}{aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle), aws.ToString(m.Body), m.Attributes, aws.ToString(m.MD5OfBody), "aws:sqs"})
	return rec
}

// delete deletes messages done with. The batch's own time may be spent:
// deleting gets time of its own, or successes would come back and count
// toward the DLQ.
func (p *poller) delete(entries []types.DeleteMessageBatchRequestEntry) {
	if len(entries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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

// changeVisibility makes messages visible again after after(message).
func (p *poller) changeVisibility(msgs []types.Message, after func(types.Message) time.Duration) error {
	if len(msgs) == 0 {
		return nil
	}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle,
			VisibilityTimeout: int32(after(m).Round(time.Second) / time.Second),
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := p.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(p.opts.QueueURL), Entries: entries})
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("%d of %d messages: %s", len(out.Failed), len(msgs), aws.ToString(out.Failed[0].Message))
	}
	return err
}

// extendVisibility keeps a slow batch's messages hidden until it ends.
func (p *poller) extendVisibility(ctx context.Context, msgs []types.Message) (stop func()) {
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
				if err := p.changeVisibility(msgs, func(types.Message) time.Duration { return p.opts.VisibilityTimeout }); err != nil {
					p.opts.Logger.Warn("visibility extension failed", "messages", len(msgs), "error", err.Error())
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
