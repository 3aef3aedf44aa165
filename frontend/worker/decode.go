package worker

import (
	"encoding/json"
	"fmt"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Decode decodes one raw record of a Lambda event from source, as the
// function for that source does with rules, which say what of a stream
// record's images to read: replay and the CLI decode the same way.
func Decode(rules *invalidate.Rules, source events.Source, raw []byte) invalidate.Record {
	switch source {
	case events.SourceSQS:
		id, changes, err := events.DecodeSQSJSON(raw)
		return invalidate.Record{ID: id, Changes: changes, Err: err}
	case events.SourceSNS:
		var rec events.SNSRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return invalidate.Record{Err: &events.DecodeError{Reason: "not an SNS record", Err: err}}
		}
		changes, err := events.DecodeSNS(rec)
		return invalidate.Record{ID: rec.SNS.MessageID, Changes: changes, Err: err}
	case events.SourceDynamoDB:
		seq, c, err := events.DecodeDynamoDBJSON(raw, rules.Attributes())
		if err != nil {
			return invalidate.Record{ID: seq, Err: err}
		}
		return invalidate.Record{ID: seq, Changes: []events.Change{c}}
	default:
		return invalidate.Record{Err: &events.DecodeError{Reason: fmt.Sprintf("records from %q are not decoded here", source)}}
	}
}
