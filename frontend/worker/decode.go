package worker

import (
	"encoding/json"
	"fmt"

	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Decode decodes one raw record of a Lambda event from source, as the
// function for that source does: replay and the CLI decode the same way.
func Decode(source decode.Source, raw []byte) invalidate.Record {
	switch source {
	case decode.SourceSQS:
		id, changes, err := decode.DecodeSQSJSON(raw)
		return invalidate.Record{ID: id, Changes: changes, Err: err}
	case decode.SourceSNS:
		var rec decode.SNSRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return invalidate.Record{Err: &decode.DecodeError{Reason: "not an SNS record", Err: err}}
		}
		changes, err := decode.DecodeSNS(rec)
		return invalidate.Record{ID: rec.SNS.MessageID, Changes: changes, Err: err}
	case decode.SourceDynamoDB:
		seq, c, err := decode.DecodeDynamoDBJSON(raw)
		if err != nil {
			return invalidate.Record{ID: seq, Err: err}
		}
		return invalidate.Record{ID: seq, Changes: []decode.Change{c}}
	default:
		return invalidate.Record{Err: &decode.DecodeError{Reason: fmt.Sprintf("records from %q are not decoded here", source)}}
	}
}
