package worker

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// DynamoDB handles a DynamoDB-Streams-triggered invoke. It takes the raw
// payload: parsing it once, without aws-lambda-go's types, keeps a
// 10,000-record batch within a 128 MB function. The response lists
// the sequence numbers of the failed records; Lambda retries from the
// lowest one (bisecting and finally sending to the on-failure destination,
// as the event source mapping says). Near the deadline the batch stops and
// what is unfinished is reported failed, rather than timing out.
func (w *Worker) DynamoDB(ctx context.Context, payload []byte) (events.DynamoDBEventResponse, error) {
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	raws, err := decode.SplitRecords(payload)
	if err != nil {
		// Not a stream event at all: fail the invoke, and Lambda retries it.
		return resp, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record {
		seq, c, err := decode.DecodeDynamoDBJSON(*raw)
		if err != nil {
			return invalidate.Record{ID: seq, Err: err}
		}
		return invalidate.Record{ID: seq, Changes: []decode.Change{c}}
	})
	rep := w.Process(ctx, "dynamodb", batch)
	for _, id := range rep.Failed() {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: id})
	}
	return resp, nil
}
