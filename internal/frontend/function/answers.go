package function

import (
	"context"
	"strings"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/frontend/worker"
)

// SQS answers an invoke of an SQS event source with ReportBatchItemFailures:
// the messages to retry as batch item failures, an empty list when there
// are none; a payload that is no SQS event fails the invoke, and Lambda
// retries it.
func SQS(w *worker.Worker, ctx context.Context, payload []byte) (lambdaevents.SQSEventResponse, error) {
	rep, err := w.Lambda(ctx, events.SourceSQS, payload)
	resp := lambdaevents.SQSEventResponse{BatchItemFailures: []lambdaevents.SQSBatchItemFailure{}}
	for _, id := range rep.ToRetry() {
		resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp, err
}

// DynamoDB answers an invoke of a DynamoDB stream: the sequence numbers to
// retry as batch item failures; Lambda retries from the lowest.
func DynamoDB(w *worker.Worker, ctx context.Context, payload []byte) (lambdaevents.DynamoDBEventResponse, error) {
	rep, err := w.Lambda(ctx, events.SourceDynamoDB, payload)
	resp := lambdaevents.DynamoDBEventResponse{BatchItemFailures: []lambdaevents.DynamoDBBatchItemFailure{}}
	for _, id := range rep.ToRetry() {
		resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.DynamoDBBatchItemFailure{ItemIdentifier: id})
	}
	return resp, err
}

// SNS answers an SNS-triggered invoke: it fails when its message is to be
// retried (RecordsFailed), so that the asynchronous invoke is retried. An
// asynchronous invoke's result goes nowhere: it is empty.
func SNS(w *worker.Worker, ctx context.Context, payload []byte) (struct{}, error) {
	rep, err := w.Lambda(ctx, events.SourceSNS, payload)
	if err != nil {
		return struct{}{}, err
	}
	var failed RecordsFailed
	for _, res := range rep.Results {
		if res.Retry() {
			failed = append(failed, "message "+res.Record+": "+res.Err.Error())
		}
	}
	if failed != nil {
		return struct{}{}, failed
	}
	return struct{}{}, nil
}

// RecordsFailed is the error of an invoke whose records are to be retried,
// each named with its reason; its type is what Lambda reports as the
// invoke's errorType.
type RecordsFailed []string

func (e RecordsFailed) Error() string { return strings.Join(e, "; ") }
