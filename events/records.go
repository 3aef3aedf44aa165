package events

import (
	"errors"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// SplitRecords returns the raw records of a Lambda event payload as Lambda
// delivers it ({"Records":[...]}: SQS, SNS, DynamoDB Streams, Kinesis; a
// Kafka event's {"records":{"topic-partition":[...]}}, its partitions one
// after the other), undecoded and
// unvalidated, so that a function reads its payload once and decodes the
// records in parallel (DecodeSQSJSON, DecodeDynamoDBJSON), which validate each
// one: a record broken inside fails alone, by its ID. Decoding the payload
// with encoding/json into typed records first costs several times the time
// and memory of all the rest (bench/README.md).
//
// A payload without Records is no event at all — a misrouted trigger, a
// manual invoke, an on-failure record sent to the wrong function — and an
// error, so that the invoke fails rather than pass as an empty batch.
func SplitRecords(payload []byte) ([][]byte, error) {
	records := [][]byte{}
	err := jsonscan.MemberElements(payload, "Records", func(rec []byte, _ jsonscan.Kind) error {
		records = append(records, rec)
		return nil
	})
	if errors.Is(err, jsonscan.ErrNoMember) {
		records, err = kafkaRecords(payload)
	}
	if errors.Is(err, jsonscan.ErrNoMember) {
		return nil, &decodeError{Reason: "not a Lambda event: no Records"}
	}
	if err != nil {
		return nil, recordError("", err)
	}
	return records, nil
}

// kafkaRecords are the records of a Kafka event, ErrNoMember when it has
// none: a "records" object of arrays.
func kafkaRecords(payload []byte) ([][]byte, error) {
	records, found := [][]byte{}, false
	err := jsonscan.Walk(payload, func(key []byte, i int) (int, error) {
		if string(key) != "records" || i >= len(payload) || payload[i] != '{' {
			_, end, err := jsonscan.SkimAt(payload, i)
			return end, err
		}
		found = true
		return jsonscan.WalkAt(payload, i, func(_ []byte, i int) (int, error) {
			return jsonscan.ElementsAt(payload, i, func(i int) (int, error) {
				_, end, err := jsonscan.SkimAt(payload, i)
				if err == nil {
					records = append(records, payload[i:end])
				}
				return end, err
			})
		})
	})
	if err == nil && !found {
		err = jsonscan.ErrNoMember
	}
	return records, err
}

// SourceOf tells the source of one record of a Lambda payload by its
// top-level members, for tools that read records of any source (invalidator
// keys): a stream record holds "dynamodb", a Kinesis record "kinesis", a
// Kafka record "offset", an SNS record "Sns", an SQS record "body". ok is false for anything else: a message body, or no JSON
// object at all.
func SourceOf(raw []byte) (source Source, ok bool) {
	err := jsonscan.Members(raw, func(key, _ []byte, _ jsonscan.Kind) error {
		switch string(key) {
		case "dynamodb":
			source, ok = SourceDynamoDB, true
		case "kinesis":
			source, ok = SourceKinesis, true
		case "offset":
			if !ok {
				source, ok = SourceKafka, true
			}
		case "Sns":
			source, ok = SourceSNS, true
		case "body":
			if !ok {
				source, ok = SourceSQS, true
			}
		}
		return nil
	})
	return source, ok && err == nil
}
