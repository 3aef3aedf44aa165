package events

import lambdaevents "github.com/aws/aws-lambda-go/events"

// DecodeSNS decodes the changes in one SNS record delivered to Lambda: its
// Message holds a change message, an array of them, or an EventBridge
// envelope.
func DecodeSNS(rec lambdaevents.SNSEventRecord) ([]Change, error) {
	env := envelope{source: SourceSNS, occurredAt: rec.SNS.Timestamp}
	changes, err := decodeBody(unsafeBytes(rec.SNS.Message), env, false, nil)
	if err != nil {
		return changes, recordError(rec.SNS.MessageID, err)
	}
	return changes, nil
}
