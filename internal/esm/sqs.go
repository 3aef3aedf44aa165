package esm

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/frontend/lambda/event"
)

// SQSMapping feeds a queue to a function, as Lambda's SQS event source
// mapping with ReportBatchItemFailures and no batching window does (the
// template's defaults): each receive is invoked at once. Messages the
// function reports failed stay, and come back when their visibility ends —
// the function may shorten it; a failed invoke leaves its whole batch to
// come back after the queue's visibility timeout.
type SQSMapping struct {
	Client   *sqs.Client
	QueueURL string
	Function Invoker
	// BatchSize is the most messages per invoke (1-10). Default 10, the
	// template's SqsBatchSize.
	BatchSize int32
	Logger    *slog.Logger
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
	batch := m.BatchSize
	if batch <= 0 || batch > 10 {
		batch = 10
	}
	for ctx.Err() == nil {
		out, err := m.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(m.QueueURL), MaxNumberOfMessages: batch, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("receive failed", "error", err.Error())
				time.Sleep(time.Second)
			}
			continue
		}
		if len(out.Messages) > 0 {
			m.deliver(ctx, log, sourceARN, out.Messages)
		}
	}
	return nil
}

// deliver invokes the function with one batch and deletes what succeeded.
func (m *SQSMapping) deliver(ctx context.Context, log *slog.Logger, sourceARN string, msgs []types.Message) {
	ev := event.SQSEvent{Records: make([]event.SQSMessage, len(msgs))}
	for i, msg := range msgs {
		ev.Records[i] = event.SQSMessage{
			MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle),
			Body: aws.ToString(msg.Body), MD5OfBody: aws.ToString(msg.MD5OfBody), Attributes: msg.Attributes,
			EventSource: "aws:sqs", EventSourceARN: sourceARN, AWSRegion: "us-east-1",
		}
	}
	failed := map[string]bool{}
	out, err := m.Function.Invoke(ctx, ev)
	var resp event.BatchResponse
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	if err != nil {
		// A failed invoke fails the whole batch: every message comes back.
		log.Warn("invoke failed: the batch will be redelivered", "messages", len(msgs), "error", err.Error())
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
	if len(done) > 0 {
		if _, err := m.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.QueueURL), Entries: done}); err != nil {
			log.Warn("delete failed", "error", err.Error())
		}
	}
	log.Info("batch delivered", "messages", len(msgs), "failed", len(failed))
}
