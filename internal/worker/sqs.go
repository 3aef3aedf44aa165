package worker

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SQS handles an SQS-triggered invoke from its raw payload, parsed once
// (decode.SplitRecords): aws-lambda-go's decoding into its types would cost
// several times all the rest. The response lists exactly the failed
// messages, so Lambda deletes the others and the failed ones return to the
// queue, and finally to its DLQ.
func (w *Worker) SQS(ctx context.Context, payload []byte) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	raws, err := decode.SplitRecords(payload)
	if err != nil {
		// Not an SQS event at all: fail the invoke, and Lambda retries it.
		return resp, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record {
		id, changes, err := decode.DecodeSQSJSON(*raw)
		return invalidate.Record{ID: id, Changes: changes, Err: err}
	})
	rep := w.Process(ctx, "sqs", batch)
	for _, id := range rep.Failed() {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp, nil
}
