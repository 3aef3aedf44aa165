package events

import (
	"encoding/json"
	"os"
	"testing"
)

func BenchmarkDecodeSQSSNSEnvelope(b *testing.B) {
	data, err := os.ReadFile("testdata/sqs-sns.json")
	if err != nil {
		b.Fatal(err)
	}
	var ev sqsEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		b.Fatal(err)
	}
	msg := ev.Records[0]
	b.SetBytes(int64(len(msg.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSQSBody(msg.MessageID, msg.Body, msg.Attributes["SentTimestamp"]); err != nil {
			b.Fatal(err)
		}
	}
}
