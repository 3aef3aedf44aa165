package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SNS handles an SNS-triggered invoke, its payload decoded into
// aws-lambda-go's types: it holds one message. SNS has no partial failure:
// when a record fails the invoke fails, so the asynchronous invoke is
// retried and finally goes to the function's on-failure destination. The
// result is empty: an asynchronous invoke's result goes nowhere.
func (w *Worker) SNS(ctx context.Context, payload []byte) (struct{}, error) {
	var ev events.SNSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return struct{}{}, fmt.Errorf("not an SNS event: %w", err)
	}
	batch := invalidate.Inputs(ev.Records, func(r *events.SNSEventRecord) invalidate.Record {
		changes, err := decode.DecodeSNS(*r)
		return invalidate.Record{ID: r.SNS.MessageID, Changes: changes, Err: err}
	})
	rep := w.Process(ctx, "sns", batch)
	var errs []error
	for _, res := range rep.Results {
		if res.Err != nil {
			errs = append(errs, fmt.Errorf("message %s: %w", res.Record, res.Err))
		}
	}
	return struct{}{}, errors.Join(errs...)
}
