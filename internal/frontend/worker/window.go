package worker

import (
	"cmp"
	"context"
	"errors"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/events"
)

// Window is the fleet's record of its last minute of first deletes, kept
// outside every process and outside the cache, whose own writes a failover
// loses: an SQS queue that keeps each message 60 s (its
// MessageRetentionPeriod, SQS's least) and that nothing consumes. Every
// batch sends it what it deleted — keys, and tags —, as second-delete
// messages. When any process sees a sign of a failover it reads the
// window, all of it, and deletes it again (Worker.afterSign): the deletes
// the failover lost are done again whichever process did them first,
// whether or not that process lives on. A message is read once in the
// fleet: it stays hidden longer than it lives.
type Window struct {
	Client WindowSQS
	URL    string
	// MaxBytes is the most a message holds, as sent: the queue's
	// MaximumMessageSize. Default DefaultDelayMaxBytes.
	MaxBytes int
}

// WindowSQS is what a Window needs of SQS; *sqs.Client has it.
type WindowSQS interface {
	Sender
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	Queues
}

// WindowRetention is how long the window's queue keeps a message: SQS's
// least, and longer than the replication lag a failover can lose and the
// seconds until a process sees a sign of it.
const WindowRetention = 60

// Add sends keys and tags to the window and returns those it could not
// send.
func (w Window) Add(ctx context.Context, keys, tags []string) (failedKeys, failedTags []string) {
	return sendAgain(ctx, w.Client, w.URL, []delivery{{tailSecond, 0}}, cmp.Or(w.MaxBytes, DefaultDelayMaxBytes), keys, tags)
}

// windowMessage is a message read from the window: its changes, and its
// receipt, to show it again should its re-delete fail.
type windowMessage struct {
	changes []events.Change
	handle  *string
}

// read receives the window's messages until it is empty, at most max of
// them, hiding each longer than it lives. A message that is not one of the
// window's is skipped: nothing else writes there.
func (w Window) read(ctx context.Context, most int) ([]windowMessage, error) {
	var msgs []windowMessage
	for len(msgs) < most {
		out, err := w.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(w.URL), MaxNumberOfMessages: int32(min(10, most-len(msgs))),
			VisibilityTimeout: WindowRetention + 60,
		})
		if err != nil {
			return msgs, err
		}
		if len(out.Messages) == 0 {
			return msgs, nil
		}
		for _, m := range out.Messages {
			changes, err := events.DecodeSQSBody(aws.ToString(m.MessageId), aws.ToString(m.Body), "")
			if err == nil && len(changes) > 0 {
				msgs = append(msgs, windowMessage{changes: changes, handle: m.ReceiptHandle})
			}
		}
	}
	return msgs, nil
}

// show makes messages visible again at once, for the next process that
// reads the window.
func (w Window) show(ctx context.Context, msgs []windowMessage) error {
	var errs []error
	for start := 0; start < len(msgs); start += 10 {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for i, m := range msgs[start:min(start+10, len(msgs))] {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.handle})
		}
		out, err := w.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(w.URL), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = errors.New(aws.ToString(out.Failed[0].Message))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
