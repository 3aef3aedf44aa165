package worker

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SQS handles an SQS-triggered invoke. The response lists exactly the
// failed messages, so Lambda deletes the others and the failed ones return
// to the queue, and finally to its DLQ.
func (w *Worker) SQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	batch := invalidate.Inputs(ev.Records, func(m *events.SQSMessage) invalidate.Record {
		changes, err := decode.DecodeSQS(*m)
		return invalidate.Record{ID: m.MessageId, Changes: changes, Err: err}
	})
	rep := w.Process(ctx, "sqs", batch)
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, id := range rep.Failed() {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp, nil
}
