package events

import (
	"encoding/json"
	"os"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"
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
