package events_test

import (
	"os"
	"testing"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
)

// BenchmarkSQSPayload splits the payload of a batch as Lambda delivers it
// and decodes every record, as the SQS function does (on one CPU here).
func BenchmarkSQSPayload(b *testing.B) {
	data, err := os.ReadFile("testdata/sqs-sns.json")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkPayload(b, data, func(raw []byte) error { _, _, err := events.DecodeSQSJSON(raw); return err })
}

// BenchmarkStreamPayload does the same as the stream function with 1,000
// MODIFY records with both images.
func BenchmarkStreamPayload(b *testing.B) {
	benchmarkPayload(b, lambdaevent.StreamPayload(1000), func(raw []byte) error { _, _, err := events.DecodeDynamoDBJSON(raw, nil); return err })
}

func benchmarkPayload(b *testing.B, data []byte, decode func(raw []byte) error) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		raws, err := events.SplitRecords(data)
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
