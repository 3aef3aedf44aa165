package worker

import (
	"context"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/frontend/lambda/event"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SQS handles an SQS-triggered invoke from its raw payload, parsed once
// (decode.SplitRecords): decoding it into types with encoding/json would
// cost several times all the rest. The response lists exactly the messages to
// retry, so Lambda deletes the others — done, or parked in the failure
// queue — and the failed ones come back to be tried again: after a
// backoff that grows with their receive count, when the worker has
// Queues, else after the queue's visibility timeout.
func (w *Worker) SQS(ctx context.Context, payload []byte) (event.BatchResponse, error) {
	resp := event.BatchResponse{BatchItemFailures: []event.BatchItemFailure{}}
	raws, err := decode.SplitRecords(payload)
	if err != nil {
		// Not an SQS event at all: fail the invoke, and Lambda retries it.
		return resp, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record { return Decode(decode.SourceSQS, *raw) })
	rep, fates := w.Handle(ctx, decode.SourceSQS, batch, func(i int) []byte { return raws[i] })
	var retry []receipt
	for i, fate := range fates {
		if fate == Retry {
			resp.Retry(rep.Results[i].Record)
			retry = append(retry, receiptOf(raws[i]))
		}
	}
	w.handBack(ctx, retry)
	return resp, nil
}
