package events

import (
	"encoding/json"
	"fmt"
)

// Decode decodes one raw record of a Lambda event from source (see
// SplitRecords), as the function for that source does: its delivery (ID,
// message, receipt...) and its changes, read in the same pass. keep says
// what of a stream record's images to read (the rules' Attributes).
// Replay and the CLI decode the same way.
func Decode(source Source, raw []byte, keep Attributes) (d Delivery, changes []Change, err error) {
	switch source {
	case SourceSQS:
		d.ID, changes, err = decodeSQSRecord(raw, &d)
	case SourceSNS:
		var rec SNSRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return d, nil, &decodeError{Reason: "not an SNS record", Err: err}
		}
		d = Delivery{ID: rec.SNS.MessageID, From: rec.SNS.TopicArn, SentAt: rec.SNS.Timestamp, message: []byte(rec.SNS.Message)}
		changes, err = DecodeSNS(rec)
	case SourceKinesis:
		d, changes, err = decodeKinesis(raw, keep)
	case SourceKafka:
		d, changes, err = decodeKafka(raw, keep)
	case SourceDynamoDB:
		var c Change
		if d.ID, c, err = DecodeDynamoDBJSON(raw, keep); err == nil {
			changes = []Change{c}
		}
	default:
		err = &decodeError{Reason: fmt.Sprintf("records from %q are not decoded here", source)}
	}
	return d, changes, err
}
