package events

import "github.com/invalidator-go/invalidator/internal/jsonscan"

// SplitRecords returns the raw records of a Lambda event payload as Lambda
// delivers it ({"Records":[...]}: SQS, SNS, DynamoDB Streams), undecoded and
// unvalidated, so that a function reads its payload once and decodes the
// records in parallel (DecodeSQSJSON, DecodeDynamoDBJSON), which validate each
// one: a record broken inside fails alone, by its ID. Decoding the payload
// with encoding/json into aws-lambda-go's types costs several times the time
// and memory (16 µs per SNS-in-SQS message against 2 for all of
// DecodeSQSJSON), and panics on some malformed DynamoDB attribute values.
func SplitRecords(payload []byte) ([][]byte, error) {
	var records [][]byte
	err := jsonscan.MemberElements(payload, "Records", func(rec []byte, _ jsonscan.Kind) error {
		records = append(records, rec)
		return nil
	})
	if err != nil {
		return nil, recordError("", err)
	}
	return records, nil
}
