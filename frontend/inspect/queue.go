package inspect

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/wait"
)

// SQS is what a Queue needs of an SQS client; *sqs.Client has it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Queue reads an SQS queue of the inspector's own, subscribed to the
// worker's topic (raw delivery or not): every message is read and deleted.
// Never point it at the worker's queue, whose messages it would take.
type Queue struct {
	Client SQS
	URL    string
	// Receivers is how many receive loops run at once, each up to 10
	// messages a receive. Default 1.
	Receivers int
	// Since skips the messages sent before it, a backlog left from before
	// the inspection: their keys were invalidated long ago. Default: 5 s
	// before Read starts, for the clocks of SQS and this host to differ.
	Since time.Time
}

// Read receives until ctx ends. A queue that cannot be read at all is an
// error at once; later failures are retried every second.
func (q *Queue) Read(ctx context.Context, emit func([]events.Change, error), failed func(error)) error {
	if q.Since.IsZero() {
		q.Since = time.Now().Add(-5 * time.Second)
	}
	first, err := q.receive(ctx)
	if err != nil {
		return fmt.Errorf("receive from %s: %w", q.URL, err)
	}
	q.take(ctx, first, emit)
	var wg sync.WaitGroup
	for range max(1, q.Receivers) {
		wg.Go(func() {
			for ctx.Err() == nil {
				msgs, err := q.receive(ctx)
				if err != nil {
					failed(fmt.Errorf("receive from %s: %w", q.URL, err))
					wait.For(ctx, time.Second)
					continue
				}
				q.take(ctx, msgs, emit)
			}
		})
	}
	wg.Wait()
	return nil
}

func (q *Queue) receive(ctx context.Context) ([]types.Message, error) {
	out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10,
		WaitTimeSeconds: 5, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp}})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	return out.Messages, nil
}

// take decodes and deletes the messages received. A message received
// again is read again: the receive that took it first may have been lost
// on its way (moto marked it in flight, the SDK retried), and a copy read
// before counts as a duplicate delivery.
func (q *Queue) take(ctx context.Context, msgs []types.Message, emit func([]events.Change, error)) {
	if len(msgs) == 0 {
		return
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		sent := m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]
		ms, err := strconv.ParseInt(sent, 10, 64)
		if fresh := err != nil || !time.UnixMilli(ms).Before(q.Since); fresh {
			emit(events.DecodeSQSBody(aws.ToString(m.MessageId), aws.ToString(m.Body), sent))
		}
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = q.Client.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: entries})
}
