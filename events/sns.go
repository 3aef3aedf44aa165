package events

import "time"

// SNSRecord is one record of an SNS event delivered to Lambda, as much of
// it as decoding reads; encoding/json fills it from the record's JSON.
type SNSRecord struct {
	SNS SNSMessage `json:"Sns"`
}

// SNSMessage is the message an SNS record carries.
type SNSMessage struct {
	MessageID string `json:"MessageId"`
	TopicArn  string
	Message   string
	Timestamp time.Time
}

// DecodeSNS decodes the changes in one SNS record delivered to Lambda: its
// Message holds a change message, an array of them, or an EventBridge
// envelope.
func DecodeSNS(rec SNSRecord) ([]Change, error) {
	env := envelope{source: SourceSNS, occurredAt: rec.SNS.Timestamp}
	changes, err := decodeBody(unsafeBytes(rec.SNS.Message), env, false, nil)
	if err != nil {
		return changes, recordError(rec.SNS.MessageID, err)
	}
	return changes, nil
}
