package lambda

import (
	"context"
	"strings"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/worker"
)

// SQS answers an invoke of an SQS event source with ReportBatchItemFailures:
// the messages to retry as batch item failures, an empty list when there
// are none; a payload that is no SQS event fails the invoke, and Lambda
// retries it.
func SQS(w *worker.Worker, ctx context.Context, payload []byte) (lambdaevents.SQSEventResponse, error) {
	rep, err := w.Lambda(ctx, events.SourceSQS, payload)
	return lambdaevents.SQSEventResponse{BatchItemFailures: failures(rep, func(id string) lambdaevents.SQSBatchItemFailure {
		return lambdaevents.SQSBatchItemFailure{ItemIdentifier: id}
	})}, err
}

// DynamoDB answers an invoke of a DynamoDB stream: the sequence numbers to
// retry as batch item failures; Lambda retries from the lowest.
func DynamoDB(w *worker.Worker, ctx context.Context, payload []byte) (lambdaevents.DynamoDBEventResponse, error) {
	rep, err := w.Lambda(ctx, events.SourceDynamoDB, payload)
	return lambdaevents.DynamoDBEventResponse{BatchItemFailures: failures(rep, func(id string) lambdaevents.DynamoDBBatchItemFailure {
		return lambdaevents.DynamoDBBatchItemFailure{ItemIdentifier: id}
	})}, err
}

// Kinesis answers an invoke of a Kinesis stream: the sequence numbers to
// retry as batch item failures; Lambda retries from the lowest.
func Kinesis(w *worker.Worker, ctx context.Context, payload []byte) (lambdaevents.KinesisEventResponse, error) {
	rep, err := w.Lambda(ctx, events.SourceKinesis, payload)
	return lambdaevents.KinesisEventResponse{BatchItemFailures: failures(rep, func(id string) lambdaevents.KinesisBatchItemFailure {
		return lambdaevents.KinesisBatchItemFailure{ItemIdentifier: id}
	})}, err
}

// failures are the batch item failures of the records to retry, each once;
// an empty list, never null, when there are none.
func failures[F any](o worker.Outcome, failure func(id string) F) []F {
	out := []F{}
	for _, id := range o.ToRetry() {
		out = append(out, failure(id))
	}
	return out
}

// Kafka answers an invoke of a Kafka event source (Amazon MSK, a
// self-managed cluster): it fails when a record is to be retried, so that
// Lambda retries the batch, each partition in order; records before it
// that failed for good are parked again then. Not a partial batch
// response: one that Lambda ignores (ReportBatchItemFailures off on the
// mapping) would pass the batch with its failures.
func Kafka(w *worker.Worker, ctx context.Context, payload []byte) (struct{}, error) {
	rep, err := w.Lambda(ctx, events.SourceKafka, payload)
	if err != nil {
		return struct{}{}, err
	}
	return struct{}{}, retried(rep, "record")
}

// SNS answers an SNS-triggered invoke: it fails when its message is to be
// retried (RecordsFailed), so that the asynchronous invoke is retried. An
// asynchronous invoke's result goes nowhere: it is empty.
func SNS(w *worker.Worker, ctx context.Context, payload []byte) (struct{}, error) {
	rep, err := w.Lambda(ctx, events.SourceSNS, payload)
	if err != nil {
		return struct{}{}, err
	}
	return struct{}{}, retried(rep, "message")
}

// retried is the error of an invoke whose records are to be retried, each
// a what named by its ID; nil when there are none.
func retried(o worker.Outcome, what string) error {
	var failed RecordsFailed
	for _, r := range o.Records {
		if r.Fate == worker.Retry {
			failed = append(failed, what+" "+r.ID+": "+r.Err.Error())
		}
	}
	if failed != nil {
		return failed
	}
	return nil
}

// RecordsFailed is the error of an invoke whose records are to be retried,
// each named with its reason; its type is what Lambda reports as the
// invoke's errorType.
type RecordsFailed []string

func (e RecordsFailed) Error() string { return strings.Join(e, "; ") }
