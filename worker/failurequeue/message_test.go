package failurequeue

import (
	"encoding/json"
	"flag"
	"reflect"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/golden"
	"github.com/invalidator-go/invalidator/worker/queues"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestParkedMessageRoundTrip: the messages of parked records, each kind of
// content, as sent — body and attributes — are testdata/parked.golden.json
// (-update rewrites it), and Parse reads each back as the record it was.
func TestParkedMessageRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 6, 18, 30, 0, 123456789, time.UTC)
	records := []Record{
		{Source: events.SourceSQS, Function: "sqs-invalidate", ID: "m1", RequestID: "req-1", Reason: "decode: unexpected end of JSON input",
			ParkedAt: at, SentAt: at.Add(-time.Second).Truncate(time.Millisecond), From: "arn:aws:sqs:us-east-1:123456789012:cache-invalidation",
			Content: Body, Data: []byte(`{"entity":"user","id":`)},
		{Source: events.SourceSNS, Function: "sns-invalidate", ID: "s1", Reason: "plan: no rule for entity \"order\"",
			ParkedAt: at, Content: Body, Data: []byte("a body SQS refuses: \x00\x01\xff")},
		{Source: events.SourceDynamoDB, Function: "stream-invalidate", ID: "49600000000000000000000000001", Reason: "NOPERM this user has no permissions to run the 'unlink' command",
			ParkedAt: at, Content: WholeRecord, Data: []byte(`{"eventID":"e1","eventName":"MODIFY","dynamodb":{"Keys":{"id":{"S":"1"}},"SequenceNumber":"49600000000000000000000000001"}}`)},
		{Source: events.SourceDynamoDB, Function: "stream-invalidate", ID: "49600000000000000000000000002", Reason: "a record past its budget",
			ParkedAt: at, Content: RecordWithoutImages, Data: []byte(`{"eventID":"e2","dynamodb":{"SequenceNumber":"49600000000000000000000000002"}}`)},
	}
	var sent []queues.Outgoing
	for _, r := range records {
		m, err := r.Message(MaxBytes)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
		back, ok, err := Parse(m.Body, m.Attributes)
		if !ok || err != nil || !reflect.DeepEqual(back, r) {
			t.Errorf("%+v reads back as %+v (%v, %v)", r, back, ok, err)
		}
	}
	got, err := json.MarshalIndent(sent, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden.Check(t, "testdata/parked.golden.json", got, *update)
}
