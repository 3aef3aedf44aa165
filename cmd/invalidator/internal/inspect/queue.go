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
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Queue reads an SQS queue of the inspector's own, subscribed to the
// worker's topic (raw delivery or not): every message it reads is deleted,
// and the backlog it skips is left. Never point it at the worker's queue,
// whose messages it would take: CheckQueue tells.
type Queue struct {
	Client SQS
	URL    string
	// Receivers is how many receive loops run at once, each up to 10
	// messages a receive. Default 1.
	Receivers int
	// Since skips the messages sent before it, a backlog left from before
	// the inspection: their keys were invalidated long ago. They are not
	// read, so not deleted: once Read ends they are visible again. Default:
	// 5 s before Read starts, for the clocks of SQS and this host to differ.
	Since time.Time

	mu      sync.Mutex
	skipped map[string]*string // message ID: its latest receipt handle
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
	q.release(ctx)
	return nil
}

// release makes the skipped messages visible again, as they were before
// the inspection received them.
func (q *Queue) release(ctx context.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var entries []types.ChangeMessageVisibilityBatchRequestEntry
	for _, handle := range q.skipped {
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(len(entries))), ReceiptHandle: handle})
	}
	clear(q.skipped)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for start := 0; start < len(entries); start += 10 { // SQS's most per batch
		// Should it fail, they come back all the same after the queue's
		// visibility timeout.
		_, _ = q.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.URL), Entries: entries[start:min(start+10, len(entries))]})
	}
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

// take decodes and deletes the messages received, and keeps the backlog
// it skips for release. A message received again is read again: the
// receive that took it first may have been lost on its way (moto marked it
// in flight, the SDK retried), and a copy read before counts as a
// duplicate delivery.
func (q *Queue) take(ctx context.Context, msgs []types.Message, emit func([]events.Change, error)) {
	var entries []types.DeleteMessageBatchRequestEntry
	for _, m := range msgs {
		sent := m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]
		if ms, err := strconv.ParseInt(sent, 10, 64); err == nil && time.UnixMilli(ms).Before(q.Since) {
			q.skip(m)
			continue
		}
		emit(events.DecodeSQSBody(aws.ToString(m.MessageId), aws.ToString(m.Body), sent))
		entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(entries))), ReceiptHandle: m.ReceiptHandle})
	}
	if len(entries) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = q.Client.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: entries})
}

func (q *Queue) skip(m types.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.skipped == nil {
		q.skipped = map[string]*string{}
	}
	q.skipped[aws.ToString(m.MessageId)] = m.ReceiptHandle
}
