package worker

import (
	"context"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SNS handles an SNS-triggered invoke: it holds one message. A message that
// fails for good is parked, and is no failure. SNS has no partial failure:
// a message to retry fails the invoke (the front end's answer), so the
// asynchronous invoke is retried and finally goes, whole, to the function's
// on-failure destination.
func (w *Worker) SNS(ctx context.Context, payload []byte) (Outcome, error) {
	var out Outcome
	raws, err := events.SplitRecords(payload)
	if err != nil {
		return out, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record { return Decode(w.inv.Rules(), events.SourceSNS, *raw) })
	rep, fates := w.Handle(ctx, events.SourceSNS, batch, func(i int) []byte { return raws[i] })
	for i, fate := range fates {
		if fate == Retry {
			out.retry(rep.Results[i].Record, rep.Results[i].Err)
		}
	}
	return out, nil
}
