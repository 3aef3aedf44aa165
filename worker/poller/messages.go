package poller

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

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
