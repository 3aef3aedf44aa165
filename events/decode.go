package events

import (
	"encoding/json"
	"fmt"
)

// Decode decodes one raw record of a Lambda event from source (see
// SplitRecords), as the function for that source does: its ID (message ID
// or sequence number), its changes, and, for SQS, its receipt, read in the
// same pass. keep says what of a stream record's images to read (the
// rules' Attributes). Replay and the CLI decode the same way.
func Decode(source Source, raw []byte, keep Attributes) (id string, changes []Change, receipt Receipt, err error) {
	switch source {
	case SourceSQS:
		id, changes, err = decodeSQSRecord(raw, &receipt)
	case SourceSNS:
		var rec SNSRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return "", nil, receipt, &decodeError{Reason: "not an SNS record", Err: err}
		}
		id = rec.SNS.MessageID
		changes, err = DecodeSNS(rec)
	case SourceDynamoDB:
		var c Change
		if id, c, err = DecodeDynamoDBJSON(raw, keep); err == nil {
			changes = []Change{c}
		}
	default:
		err = &decodeError{Reason: fmt.Sprintf("records from %q are not decoded here", source)}
	}
	return id, changes, receipt, err
}
