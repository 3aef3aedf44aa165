package worker

import (
	"context"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// DynamoDB handles a batch of a DynamoDB stream from its raw payload:
// parsing it once, without decoding it into types first, keeps a
// 10,000-record batch within a 128 MB function. A record that fails for
// good is parked and not reported, so it never blocks its shard; the
// outcome lists the sequence numbers of the records to retry, and the
// source retries from the lowest one, for as long as its mapping allows.
// Near the deadline the batch stops and what is unfinished is reported,
// rather than timing out.
func (w *Worker) DynamoDB(ctx context.Context, payload []byte) (Outcome, error) {
	var out Outcome
	raws, err := events.SplitRecords(payload)
	if err != nil {
		return out, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record { return Decode(w.inv.Rules(), events.SourceDynamoDB, *raw) })
	rep, fates := w.Handle(ctx, events.SourceDynamoDB, batch, func(i int) []byte { return raws[i] })
	for i, fate := range fates {
		if fate == Retry {
			out.retry(rep.Results[i].Record, rep.Results[i].Err)
		}
	}
	return out, nil
}
