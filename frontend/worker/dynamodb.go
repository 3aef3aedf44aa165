package worker

import (
	"context"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/frontend/lambda/event"
	"github.com/invalidator-go/invalidator/invalidate"
)

// DynamoDB handles a DynamoDB-Streams-triggered invoke. It takes the raw
// payload: parsing it once, without decoding it into types first, keeps a
// 10,000-record batch within a 128 MB function. A record that fails for
// good is parked and not reported, so it never blocks its shard; the
// response lists the sequence numbers of the records to retry, and Lambda
// retries from the lowest one, for as long as the mapping allows. Near the
// deadline the batch stops and what is unfinished is reported, rather than
// timing out.
func (w *Worker) DynamoDB(ctx context.Context, payload []byte) (event.BatchResponse, error) {
	resp := event.BatchResponse{BatchItemFailures: []event.BatchItemFailure{}}
	raws, err := decode.SplitRecords(payload)
	if err != nil {
		// Not a stream event at all: fail the invoke, and Lambda retries it.
		return resp, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record { return Decode(decode.SourceDynamoDB, *raw) })
	rep, fates := w.Handle(ctx, decode.SourceDynamoDB, batch, func(i int) []byte { return raws[i] })
	for i, fate := range fates {
		if fate == Retry {
			resp.Retry(rep.Results[i].Record)
		}
	}
	return resp, nil
}
