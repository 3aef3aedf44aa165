package function

import (
	"context"
	"strings"

	"github.com/invalidator-go/invalidator/frontend/function/shape"
	"github.com/invalidator-go/invalidator/frontend/worker"
)

// SQS answers an invoke of an SQS event source with ReportBatchItemFailures:
// the messages to retry as batch item failures, an empty list when there
// are none; a payload that is no SQS event fails the invoke, and Lambda
// retries it.
func SQS(w *worker.Worker, ctx context.Context, payload []byte) (shape.BatchResponse, error) {
	out, err := w.SQS(ctx, payload)
	return batchResponse(out), err
}

// DynamoDB answers an invoke of a DynamoDB stream: the sequence numbers to
// retry as batch item failures; Lambda retries from the lowest.
func DynamoDB(w *worker.Worker, ctx context.Context, payload []byte) (shape.BatchResponse, error) {
	out, err := w.DynamoDB(ctx, payload)
	return batchResponse(out), err
}

func batchResponse(out worker.Outcome) shape.BatchResponse {
	resp := shape.BatchResponse{BatchItemFailures: []shape.BatchItemFailure{}}
	for _, id := range out.IDs() {
		resp.Retry(id)
	}
	return resp
}

// SNS answers an SNS-triggered invoke: it fails when its message is to be
// retried (RecordsFailed), so that the asynchronous invoke is retried. An
// asynchronous invoke's result goes nowhere: it is empty.
func SNS(w *worker.Worker, ctx context.Context, payload []byte) (struct{}, error) {
	out, err := w.SNS(ctx, payload)
	if err != nil {
		return struct{}{}, err
	}
	var failed RecordsFailed
	for _, f := range out.Retry {
		failed = append(failed, "message "+f.Record+": "+f.Err.Error())
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
