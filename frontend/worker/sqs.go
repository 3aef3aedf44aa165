package worker

import (
	"context"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SQS handles a batch of an SQS event source from its raw payload, parsed
// once (events.SplitRecords): decoding it into types with encoding/json
// would cost several times all the rest. The outcome lists exactly the
// messages to retry, so the others — done, or parked in the failure queue —
// can be deleted, and the failed ones come back to be tried again: after a
// backoff that grows with their receive count, when the worker has Queues,
// else after the queue's visibility timeout. A payload that is not an SQS
// event at all is an error.
func (w *Worker) SQS(ctx context.Context, payload []byte) (Outcome, error) {
	var out Outcome
	raws, err := events.SplitRecords(payload)
	if err != nil {
		return out, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record { return Decode(w.inv.Rules(), events.SourceSQS, *raw) })
	rep, fates := w.Handle(ctx, events.SourceSQS, batch, func(i int) []byte { return raws[i] })
	var retry []receipt
	for i, fate := range fates {
		if fate == Retry {
			out.retry(rep.Results[i].Record, rep.Results[i].Err)
			retry = append(retry, receiptOf(raws[i]))
		}
	}
	w.handBack(ctx, retry)
	return out, nil
}
