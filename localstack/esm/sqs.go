package esm

import (
	"cmp"
	"context"
	"encoding/json"
	lambdaevents "github.com/aws/aws-lambda-go/events"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/events/lambdaevent"
)

// SQSMapping feeds a queue to a function, as Lambda's SQS event source
// mapping with ReportBatchItemFailures does: with no batching window (the
// template's default) each receive is invoked at once; with one, receives
// of up to 10 gather into a batch until it is full or the window ends. Messages the
// function reports failed stay, and come back when their visibility ends —
// the function may shorten it; a failed invoke leaves its whole batch to
// come back after the queue's visibility timeout.
//
// Lambda invokes several batches at once, five to begin with, and more
// while messages keep coming; so does the mapping, one batch at a time per
// Functions' invoker: Steady receive loops always, one more for each full
// batch while invokers are free, at most one more every scaleEvery, and
// those beyond Steady end at an empty receive.
type SQSMapping struct {
	Client    *sqs.Client
	QueueURL  string
	Functions []Invoker // each takes one invoke at a time
	// Steady is how many receive loops always run. Default 5, or as many
	// as Functions when fewer.
	Steady int
	// InvokeTimeout bounds an invoke, as Lambda's function timeout does
	// (plus the emulator's own time): past it the invoke fails, and its
	// batch comes back after the queue's visibility timeout. Default none.
	InvokeTimeout time.Duration
	// BatchSize is the most messages per invoke: 1-10, up to 10,000 with
	// a BatchingWindow. Default 10, the template's SqsBatchSize.
	BatchSize int32
	// BatchingWindow is how long a batch may gather messages before it is
	// invoked (SqsBatchingWindow); zero invokes each receive at once.
	BatchingWindow time.Duration
	// WaitTime is each receive's long poll, 1-20 s. Default 20 s, as
	// Lambda's pollers wait; a stopping mapping waits out the polls in
	// flight.
	WaitTime time.Duration
	Logger   *slog.Logger
}

// Run polls until ctx ends.
func (m *SQSMapping) Run(ctx context.Context) error {
	log := logger(m.Logger).With("mapping", "sqs", "queue", m.QueueURL)
	arn, err := m.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(m.QueueURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return stopped(ctx, err)
	}
	sourceARN := arn.Attributes[string(types.QueueAttributeNameQueueArn)]
	batch, most := m.BatchSize, int32(10)
	if m.BatchingWindow > 0 {
		most = 10_000
	}
	if batch <= 0 || batch > most {
		batch = 10
	}
	free := make(chan Invoker, len(m.Functions))
	for _, fn := range m.Functions {
		free <- fn
	}
	steady := min(cmp.Or(m.Steady, 5), len(m.Functions))
	var wg sync.WaitGroup
	var lastScale atomic.Int64
	var loop func(fn Invoker, steady bool)
	loop = func(fn Invoker, steady bool) {
		defer func() { free <- fn }()
		for ctx.Err() == nil {
			msgs := m.gather(ctx, log, batch)
			if len(msgs) == 0 && !steady {
				return
			}
			if int32(len(msgs)) == batch && time.Since(time.Unix(0, lastScale.Load())) >= scaleEvery {
				select {
				case more := <-free:
					lastScale.Store(time.Now().UnixNano())
					wg.Go(func() { loop(more, false) })
				default:
				}
			}
			switch {
			case len(msgs) > 0 && ctx.Err() != nil:
				m.handBack(log, msgs)
			case len(msgs) > 0:
				// A batch invoked finishes even when the mapping is stopping:
				// Lambda's pollers never vanish mid-batch.
				m.deliver(context.WithoutCancel(ctx), fn, log, sourceARN, msgs)
			}
		}
	}
	for range steady {
		fn := <-free
		wg.Go(func() { loop(fn, true) })
	}
	wg.Wait()
	return nil
}

// scaleEvery is how often a mapping may add a batch at once: Lambda adds
// up to 300 a minute.
const scaleEvery = 200 * time.Millisecond

// gather receives one batch: one receive, or with a batching window
// receives of up to 10 (SQS's most) until the batch is full or the window,
// counted from the first message, ends. A stop does not cut a receive
// short: SQS may already have handed out messages only its answer names,
// which the mapping then hands back.
func (m *SQSMapping) gather(ctx context.Context, log *slog.Logger, batch int32) []types.Message {
	var msgs []types.Message
	var deadline time.Time
	for ctx.Err() == nil && int32(len(msgs)) < batch && (msgs == nil || time.Now().Before(deadline)) {
		wait := min(max(cmp.Or(m.WaitTime, 20*time.Second), time.Second), 20*time.Second)
		if msgs != nil { // no longer than the window has left
			wait = min(wait, max(time.Until(deadline), time.Second))
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+10*time.Second)
		out, err := m.Client.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(m.QueueURL), MaxNumberOfMessages: min(batch-int32(len(msgs)), 10), WaitTimeSeconds: int32(wait / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("receive failed", "error", err.Error())
				time.Sleep(time.Second)
			}
			break
		}
		if msgs == nil && len(out.Messages) > 0 {
			deadline = time.Now().Add(m.BatchingWindow)
		}
		msgs = append(msgs, out.Messages...)
		if m.BatchingWindow <= 0 {
			break
		}
	}
	return msgs
}

// handBack makes messages received while stopping visible again at once,
// for the next consumer, rather than after their visibility timeout.
func (m *SQSMapping) handBack(log *slog.Logger, msgs []types.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for chunk := range slices.Chunk(msgs, 10) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, msg := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle}
		}
		if _, err := m.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(m.QueueURL), Entries: entries}); err != nil {
			log.Warn("cannot hand back the messages received while stopping: they come back after their visibility timeout", "error", err.Error())
		}
	}
	log.Info("stopping: messages received and not invoked handed back", "messages", len(msgs))
}

// deliver invokes the function with one batch and deletes what succeeded.
func (m *SQSMapping) deliver(ctx context.Context, fn Invoker, log *slog.Logger, sourceARN string, msgs []types.Message) {
	ev := lambdaevent.SQSEvent{Records: make([]lambdaevent.SQSMessage, len(msgs))}
	for i, msg := range msgs {
		ev.Records[i] = sqsMessageOf(msg, sourceARN, "us-east-1")
	}
	failed := map[string]bool{}
	start := time.Now()
	ictx, cancel := ctx, context.CancelFunc(func() {})
	if m.InvokeTimeout > 0 {
		ictx, cancel = context.WithTimeout(ctx, m.InvokeTimeout)
	}
	out, err := fn.Invoke(ictx, ev)
	cancel()
	var resp lambdaevents.SQSEventResponse
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	if err != nil {
		// A failed invoke fails the whole batch: every message comes back.
		log.Warn("invoke failed: the batch will be redelivered", "messages", len(msgs), "duration_ms", time.Since(start).Milliseconds(), "error", err.Error())
		return
	}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var done []types.DeleteMessageBatchRequestEntry
	for i, msg := range msgs {
		if !failed[aws.ToString(msg.MessageId)] {
			done = append(done, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
		}
	}
	// What the function did is deleted even when the mapping is stopping
	// meanwhile: it would come back, to be done again, after its visibility.
	dctx, cancelDeletes := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelDeletes()
	for chunk := range slices.Chunk(done, 10) { // SQS deletes at most 10 at a time
		if _, err := m.Client.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.QueueURL), Entries: chunk}); err != nil {
			log.Warn("delete failed", "error", err.Error())
		}
	}
	ids := make([]string, min(len(msgs), 10)) // enough to follow a message from the log
	for i := range ids {
		ids[i] = aws.ToString(msgs[i].MessageId)
	}
	log.Info("batch delivered", "messages", len(msgs), "failed", len(failed), "duration_ms", time.Since(start).Milliseconds(), "ids", ids)
}

// sqsMessageOf is a received message as Lambda's SQS event source hands it
// to the function, from the queue at sourceARN in region.
func sqsMessageOf(m types.Message, sourceARN, region string) lambdaevent.SQSMessage {
	return lambdaevent.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		MD5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes,
		EventSource: "aws:sqs", EventSourceARN: sourceARN, AWSRegion: region,
	}
}
