package events

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
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

// BenchmarkSQSPayload splits the payload of a batch as Lambda delivers it
// and decodes every record, as the SQS function does (on one CPU here).
func BenchmarkSQSPayload(b *testing.B) {
	data, err := os.ReadFile("testdata/sqs-sns.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		raws, err := SplitRecords(data)
		if err != nil {
			b.Fatal(err)
		}
		for _, raw := range raws {
			if _, _, err := DecodeSQSJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkStreamPayload splits a stream batch as Lambda delivers it and
// decodes every record, as the stream function does (on one CPU here): 1,000
// MODIFY records with both images.
func BenchmarkStreamPayload(b *testing.B) {
	var p strings.Builder
	p.WriteString(`{"Records":[`)
	for i := range 1000 {
		if i > 0 {
			p.WriteByte(',')
		}
		fmt.Fprintf(&p, `{"eventID":"%032x","eventName":"MODIFY","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",`+
			`"dynamodb":{"ApproximateCreationDateTime":1795953600,"Keys":{"id":{"S":"p-%d"}},`+
			`"NewImage":{"id":{"S":"p-%d"},"category":{"S":"boots"},"tags":{"SS":["winter"]}},`+
			`"OldImage":{"id":{"S":"p-%d"},"category":{"S":"shoes"},"tags":{"SS":["sale"]}},`+
			`"SequenceNumber":"110000000001%010d","SizeBytes":312,"StreamViewType":"NEW_AND_OLD_IMAGES"},`+
			`"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/Products/stream/2026-11-29T12:00:00.000"}`, i, i, i, i, i)
	}
	p.WriteString(`]}`)
	data := []byte(p.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		raws, err := SplitRecords(data)
		if err != nil {
			b.Fatal(err)
		}
		for _, raw := range raws {
			if _, _, err := DecodeDynamoDBJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	}
}
