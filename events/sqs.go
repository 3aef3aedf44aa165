package events

import (
	"strconv"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// DecodeSQS decodes the changes in one SQS message: a raw change message (or
// an array of them), or one wrapped in an SNS or EventBridge envelope. With
// an error it may still return the changes of an array that did decode, so
// that their keys are invalidated while the message is retried.
func DecodeSQS(msg lambdaevents.SQSMessage) ([]Change, error) {
	return DecodeSQSBody(msg.MessageId, msg.Body, msg.Attributes["SentTimestamp"])
}

// DecodeSQSBody decodes an SQS message body. id names the message in errors;
// sentTimestamp, SQS's SentTimestamp attribute (milliseconds since the
// epoch), dates the changes that carry no time of their own; it may be "".
// The poller, which receives through the SDK, calls it directly.
func DecodeSQSBody(id, body, sentTimestamp string) ([]Change, error) {
	changes, err := decodeBody(unsafeBytes(body), envelope{source: SourceSQS}, true, nil)
	if err != nil {
		return changes, recordError(id, err)
	}
	var sent time.Time
	for i := range changes {
		if changes[i].OccurredAt.IsZero() {
			if sent.IsZero() {
				sent = sentAt(sentTimestamp)
			}
			changes[i].OccurredAt = sent
		}
	}
	return changes, nil
}

func sentAt(ms string) time.Time {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}
