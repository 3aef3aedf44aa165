package worker

import (
	"context"
	"strings"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SNS handles an SNS-triggered invoke: it holds one message. A message that
// fails for good is parked and the invoke succeeds. SNS has no partial
// failure: when a message fails for now the invoke fails, so the
// asynchronous invoke is retried and finally goes, whole, to the function's
// on-failure destination. The result is empty: an asynchronous invoke's
// result goes nowhere.
func (w *Worker) SNS(ctx context.Context, payload []byte) (struct{}, error) {
	raws, err := decode.SplitRecords(payload)
	if err != nil {
		return struct{}{}, err
	}
	batch := invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record { return Decode(decode.SourceSNS, *raw) })
	rep, fates := w.Handle(ctx, decode.SourceSNS, batch, func(i int) []byte { return raws[i] })
	var failed RecordsFailed
	for i, fate := range fates {
		if fate == Retry {
			failed = append(failed, "message "+rep.Results[i].Record+": "+rep.Results[i].Err.Error())
		}
	}
	if failed != nil {
		return struct{}{}, failed
	}
	return struct{}{}, nil
}

// RecordsFailed is the error of an invoke whose records are to be retried,
// one line each; the runtime reports its type name as the errorType.
type RecordsFailed []string

func (e RecordsFailed) Error() string { return strings.Join(e, "; ") }
