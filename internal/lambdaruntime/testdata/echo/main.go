// Command echo is a Lambda function for the emulator test: it answers
// each event with what it was given, or fails as the event asks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/invalidator-go/invalidator/internal/lambdaruntime"
)

type RecordsFailed []string

func (e RecordsFailed) Error() string { return e[0] }

func main() {
	if msg := os.Getenv("ECHO_INIT_ERROR"); msg != "" {
		lambdaruntime.InitError(errors.New(msg))
	}
	lambdaruntime.Start(func(ctx context.Context, payload []byte) ([]byte, error) {
		var event string
		_ = json.Unmarshal(payload, &event)
		switch event {
		case "error":
			return nil, RecordsFailed{"message 1: cache down"}
		case "panic":
			panic("boom")
		case "context":
			deadline, _ := ctx.Deadline()
			trace, traced := os.LookupEnv("_X_AMZN_TRACE_ID")
			return json.Marshal(map[string]any{
				"requestId": lambdaruntime.RequestID(ctx),
				"arn":       lambdaruntime.InvokedFunctionARN(ctx),
				"traceId":   lambdaruntime.TraceID(ctx),
				"traceEnv":  trace,
				"traced":    traced,
				"remaining": time.Until(deadline).Seconds(),
				"pid":       os.Getpid(),
			})
		}
		return payload, nil
	})
}
