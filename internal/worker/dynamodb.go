package worker

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// DynamoDB handles a DynamoDB-Streams-triggered invoke. The response lists
// the sequence numbers of the failed records; Lambda retries from the
// lowest one (bisecting and finally sending to the on-failure destination,
// as the event source mapping says). Near the deadline the batch stops and
// what is unfinished is reported failed, rather than timing out.
func (w *Worker) DynamoDB(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	records := invalidate.Records(ev.Records, func(r *events.DynamoDBEventRecord) invalidate.Record {
		c, err := decode.DecodeDynamoDB(*r)
		if err != nil {
			return invalidate.Record{ID: r.Change.SequenceNumber, Err: err}
		}
		return invalidate.Record{ID: r.Change.SequenceNumber, Changes: []decode.Change{c}}
	})
	rep := w.Process(ctx, "dynamodb", records)
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	for _, id := range rep.Failed() {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: id})
	}
	return resp, nil
}
