package worker

import (
	"context"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Lambda handles an invoke of a Lambda function from source — an SQS
// queue, an SNS topic or a DynamoDB stream — from its raw payload, parsed
// once (events.SplitRecords): decoding it into types with encoding/json
// would cost several times all the rest, and a 10,000-record stream batch
// stays within a 128 MB function. The report tells each record's fate;
// the SQS messages to retry are handed back to their queue first, to come
// back after a backoff that grows with their receive count (when the
// worker has Queues; else after the queue's visibility timeout). A payload
// that is not an event of its source at all is an error.
func (w *Worker) Lambda(ctx context.Context, source events.Source, payload []byte) (invalidate.Report, error) {
	raws, err := events.SplitRecords(payload)
	if err != nil {
		return invalidate.Report{}, err
	}
	records := make([]record, len(raws))
	for i, raw := range raws {
		records[i].raw = raw
	}
	keep := w.inv.Rules().Attributes()
	batch := invalidate.Inputs(records, func(r *record) invalidate.Record {
		id, changes, receipt, err := events.Decode(source, r.raw, keep)
		r.receipt = receipt
		return invalidate.Record{ID: id, Changes: changes, Err: err}
	})
	rep := w.Handle(ctx, source, batch, func(i int) []byte { return raws[i] })
	if source == events.SourceSQS {
		w.handBack(ctx, rep, records)
	}
	return rep, nil
}

// record is a raw record of an invoke, and its receipt once decoded.
type record struct {
	raw     []byte
	receipt events.Receipt
}
