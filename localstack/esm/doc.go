// Package esm is a local event source mapping: it does for the functions
// running under the Runtime Interface Emulator what Lambda does for them in
// the cloud, against moto or LocalStack, with template.yaml's settings by
// default. An SQS mapping receives batches, invokes the function one batch
// at a time and deletes the messages that did not fail; the queue's
// redrive policy moves the others to its DLQ. A stream mapping reads a
// DynamoDB stream, a Kinesis mapping a Kinesis data stream (moto's
// sequence numbers are small integers, AWS's 56 digits; nothing here
// compares them), each from its oldest record or its checkpoint, invokes the
// function, keeps its checkpoint in a file, retries from the lowest failed
// sequence number after a backoff (halving the batch when the invoke
// itself failed), counts attempts per record, and gives a record up — its
// coordinates to an on-failure queue, or it whole to a bucket — only past
// the retry and age limits.
// It is a dev and test tool, not part of the deployed worker.
package esm

import (
	"context"
	"log/slog"
)

// Invoker invokes a function with an event; *rie.Emulator is one.
type Invoker interface {
	Invoke(ctx context.Context, event any) ([]byte, error)
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// stopped turns an error that the end of ctx caused into the clean stop
// it is: a call cut short by the mapping's end is not a failure.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
