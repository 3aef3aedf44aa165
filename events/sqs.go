package events

import (
	"strconv"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// DecodeSQS decodes the changes in one SQS message: a raw change message (or
// an array of them), or one wrapped in an SNS or EventBridge envelope.
func DecodeSQS(msg lambdaevents.SQSMessage) ([]Change, error) {
	return DecodeSQSBody(msg.MessageId, msg.Body, sentAt(msg.Attributes))
}

// DecodeSQSBody decodes an SQS message body. id names the message in errors;
// sent, when not zero, is when SQS received it, the time of last resort.
// The poller, which receives through the SDK, calls it directly.
func DecodeSQSBody(id, body string, sent time.Time) ([]Change, error) {
	changes, err := decodeBody(unsafeBytes(body), envelope{source: SourceSQS, occurredAt: sent}, true, nil)
	if err != nil {
		return nil, recordError(id, err)
	}
	return changes, nil
}

// sentAt reads the SentTimestamp attribute (milliseconds since the epoch).
func sentAt(attrs map[string]string) time.Time {
	ms, err := strconv.ParseInt(attrs["SentTimestamp"], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
