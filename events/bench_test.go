package events

import (
	"encoding/json"
	"os"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/invalidator-go/invalidator/internal/testenv"
)

func BenchmarkDecodeSQSSNSEnvelope(b *testing.B) {
	data, err := os.ReadFile("testdata/sqs-sns.json")
	if err != nil {
		b.Fatal(err)
	}
	var ev lambdaevents.SQSEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		b.Fatal(err)
	}
	msg := ev.Records[0]
	b.SetBytes(int64(len(msg.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSQS(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSQSPayload splits the payload of a batch as Lambda delivers it
// and decodes every record, as the SQS function does (on one CPU here).
func BenchmarkSQSPayload(b *testing.B) {
	data, err := os.ReadFile("testdata/sqs-sns.json")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkPayload(b, data, func(raw []byte) error { _, _, err := DecodeSQSJSON(raw); return err })
}

// BenchmarkStreamPayload does the same as the stream function with 1,000
// MODIFY records with both images.
func BenchmarkStreamPayload(b *testing.B) {
	benchmarkPayload(b, testenv.StreamPayload(1000), func(raw []byte) error { _, _, err := DecodeDynamoDBJSON(raw); return err })
}

func benchmarkPayload(b *testing.B, data []byte, decode func(raw []byte) error) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		raws, err := SplitRecords(data)
		if err != nil {
			b.Fatal(err)
		}
		for _, raw := range raws {
			if err := decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	}
}
