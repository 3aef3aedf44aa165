package failurequeue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

const queue = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-failures"

// park sends records through a fake failure queue and reads them back.
func park(t *testing.T, records ...Record) ([]Record, []error) {
	t.Helper()
	f := &queuestest.SQS{}
	errs := Queue{Client: f, URL: queue}.Park(t.Context(), records)
	out, err := f.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	var back []Record
	for _, m := range out.Messages {
		r, ok, err := Parse(aws.ToString(m.Body), queues.Strings(m.MessageAttributes))
		if !ok || err != nil {
			t.Fatalf("not a parked record (%v, %v): %.200s", ok, err, aws.ToString(m.Body))
		}
		back = append(back, r)
	}
	return back, errs
}

// newFrom is New of a raw record as the worker decodes it; id, when not
// empty, is the ID the record had.
func newFrom(source events.Source, function, id, reason string, raw []byte, at time.Time) Record {
	d, _, _ := events.Decode(source, raw, events.Attributes{})
	if id != "" {
		d.ID = id
	}
	return New(source, function, d, reason, raw, at)
}

// TestAMessageIsParkedAsItCame: an SQS message's body, an SNS record's
// message, byte for byte, with their coordinates and the reason as
// attributes; what SQS refuses in the reason is replaced.
func TestAMessageIsParkedAsItCame(t *testing.T) {
	sent := time.UnixMilli(1_796_000_000_123).UTC()
	body := `{"entity":"user","id":"<1>&` + "\u2028\"" // not valid JSON: that is why it is parked
	sqsRecord, _ := json.Marshal(lambdaevent.SQSMessage{MessageId: "m1", Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:1:q",
		Attributes: map[string]string{"SentTimestamp": "1796000000123"}})
	snsRecord, _ := json.Marshal(events.SNSRecord{SNS: events.SNSMessage{MessageID: "s1", Message: body, Timestamp: sent}})
	at := time.Now()
	for _, c := range []struct {
		source events.Source
		raw    []byte
		id     string
	}{{events.SourceSQS, sqsRecord, "m1"}, {events.SourceSNS, snsRecord, "s1"}} {
		r := newFrom(c.source, "fn", "", "why\x00\uffff\xff <&>", c.raw, at)
		r.RequestID = "req-1"
		back, errs := park(t, r)
		if errs[0] != nil || len(back) != 1 {
			t.Fatalf("%s: %v", c.source, errs[0])
		}
		p := back[0]
		if p.Content != Body || string(p.Data) != body || p.ID != c.id || p.Source != c.source || p.Function != "fn" || p.RequestID != "req-1" {
			t.Fatalf("%s: parked %+v, want the body as it came and its coordinates", c.source, p)
		}
		if !p.SentAt.Equal(sent) || !p.ParkedAt.Equal(at) {
			t.Fatalf("%s: sent at %v, parked at %v: want %v, %v", c.source, p.SentAt, p.ParkedAt, sent, at)
		}
		if p.Reason != "why\ufffd\ufffd\ufffd <&>" {
			t.Fatalf("%s: reason %q", c.source, p.Reason)
		}
	}
}

// TestARecordThatCannotBeReadIsParkedWhole: a record with no body, not
// JSON, or not UTF-8 comes back whole, byte for byte; a body SQS would
// refuse raw (U+FFFF, which came in escaped), in base64.
func TestARecordThatCannotBeReadIsParkedWhole(t *testing.T) {
	for _, c := range []struct {
		raw, data string
		content   Content
	}{
		{`{"messageId":"m1"}`, `{"messageId":"m1"}`, WholeRecord},
		{`{"messageId":"m1","body":"{`, `{"messageId":"m1","body":"{`, WholeRecord},
		{`{"messageId":"m1","body":17}`, `{"messageId":"m1","body":17}`, WholeRecord},
		{"{\"body\":\"\xff\xfe\"}", "{\"body\":\"\xff\xfe\"}", WholeRecord},
		{`{"body":"a\uffffb\u0000"}`, "a\uffffb\x00", Body},
	} {
		back, errs := park(t, newFrom(events.SourceSQS, "sqs-invalidate", "m1", "why", []byte(c.raw), time.Now()))
		if errs[0] != nil || len(back) != 1 || back[0].Content != c.content || string(back[0].Data) != c.data {
			t.Fatalf("%q: parked %+v (%v), want %s %q", c.raw, back, errs[0], c.content, c.data)
		}
	}
}

// TestAParkedMessageFitsWithItsAttributes: a body within 1 MiB of
// characters JSON escapes stays itself, its attributes counted; a long
// reason is cut.
func TestAParkedMessageFitsWithItsAttributes(t *testing.T) {
	body := strings.Repeat(`"<&>`+"\n", 1000*1000/5)
	raw, _ := json.Marshal(lambdaevent.SQSMessage{MessageId: "m1", Body: body})
	back, errs := park(t, newFrom(events.SourceSQS, "sqs-invalidate", "m1", strings.Repeat("é", 10_000), raw, time.Now()))
	if errs[0] != nil || string(back[0].Data) != body || len(back[0].Reason) > maxReason {
		t.Fatalf("%v: want the body whole and the reason cut to %d bytes, got %d", errs[0], maxReason, len(back[0].Reason))
	}
	// Attributes at their longest, beside a body as long as a queue that
	// leaves them room takes, fit.
	long := strings.Repeat("x", 10_000)
	raw, _ = json.Marshal(lambdaevent.SQSMessage{MessageId: long, Body: strings.Repeat("y", MaxBytes-MaxAttributeBytes), EventSourceARN: long,
		Attributes: map[string]string{"SentTimestamp": "1796000000123"}})
	r := newFrom(events.SourceSQS, long, "", long, raw, time.Now())
	r.RequestID = long
	if _, errs := park(t, r); errs[0] != nil {
		t.Fatalf("a body of MaxBytes-MaxAttributeBytes: %v", errs[0])
	}
	// A body that fills the queue's 1 MiB leaves no room for its
	// attributes: it stays with its source.
	raw, _ = json.Marshal(lambdaevent.SQSMessage{MessageId: "m1", Body: strings.Repeat("x", MaxBytes-100)})
	if _, errs := park(t, newFrom(events.SourceSQS, "sqs-invalidate", "m1", "why", raw, time.Now())); !errors.Is(errs[0], errTooLarge) {
		t.Fatalf("err = %v, want errTooLarge", errs[0])
	}
}

func TestAStreamRecordTooLargeIsKeptWithoutItsImages(t *testing.T) {
	big := strings.Repeat("x", MaxBytes)
	raw, _ := json.Marshal(map[string]any{"eventName": "MODIFY", "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/T/stream/L",
		"dynamodb": map[string]any{"SequenceNumber": "100", "Keys": map[string]any{"id": map[string]string{"S": "1"}},
			"NewImage": map[string]any{"blob": map[string]string{"S": big}}, "OldImage": map[string]any{"blob": map[string]string{"S": "<old>"}}}})
	back, errs := park(t, newFrom(events.SourceDynamoDB, "stream-invalidate", "100", "cannot plan", raw, time.Now()))
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	want := `{"dynamodb":{"Keys":{"id":{"S":"1"}},"NewImage":{},"OldImage":{},"SequenceNumber":"100"},"eventName":"MODIFY","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/T/stream/L"}`
	if back[0].Content != RecordWithoutImages || string(back[0].Data) != want {
		t.Fatalf("parked %s %.300s: want the record without its images, the rest as it came", back[0].Content, back[0].Data)
	}
	// Anything else that large cannot be parked: it stays with its source.
	if _, errs := park(t, newFrom(events.SourceSQS, "sqs-invalidate", "m1", "malformed", []byte(`"`+big+`"`), time.Now())); !errors.Is(errs[0], errTooLarge) {
		t.Fatalf("err = %v, want errTooLarge", errs[0])
	}
}

// TestParseReadsTheEarlierEnvelope: records parked by earlier versions, one
// JSON object each, still sit in queues.
func TestParseReadsTheEarlierEnvelope(t *testing.T) {
	for _, c := range []struct {
		body    string
		content Content
		data    string
	}{
		{`{"kind":"invalidator.parked/v1","source":"sqs","function":"f","recordId":"m1","reason":"r","parkedAt":"2026-12-01T10:00:00Z","record":{"messageId":"m1","body":"x"}}`, WholeRecord, `{"messageId":"m1","body":"x"}`},
		{`{"kind":"invalidator.parked/v1","source":"sqs","recordId":"m1","reason":"r","parkedAt":"2026-12-01T10:00:00Z","recordBase64":"/w=="}`, WholeRecord, "\xff"},
		{`{"kind":"invalidator.parked/v1","source":"dynamodb","recordId":"9","reason":"r","parkedAt":"2026-12-01T10:00:00Z","record":{"dynamodb":{}},"truncated":true}`, RecordWithoutImages, `{"dynamodb":{}}`},
	} {
		r, ok, err := Parse(c.body, nil)
		if !ok || err != nil || r.Content != c.content || string(r.Data) != c.data || r.ParkedAt.IsZero() {
			t.Fatalf("%s: parsed %+v (%v, %v)", c.body, r, ok, err)
		}
	}
	if _, isParked, _ := Parse(`{"DDBStreamBatchInfo":{}}`, nil); isParked {
		t.Fatal("an on-failure record taken for a parked one")
	}
}

func TestParkSaysWhatWasNotParked(t *testing.T) {
	f := &queuestest.SQS{}
	ok := newFrom(events.SourceSNS, "sns-invalidate", "a", "bad", []byte(`{}`), time.Now())
	huge := newFrom(events.SourceSNS, "sns-invalidate", "b", "bad", []byte(`"`+strings.Repeat("x", MaxBytes)+`"`), time.Now())
	errs := Queue{Client: f, URL: queue}.Park(context.Background(), []Record{ok, huge})
	if errs[0] != nil || !errors.Is(errs[1], errTooLarge) || len(f.Messages(queue)) != 1 {
		t.Fatalf("errs %v, %d sent: want the first parked, the second refused", errs, len(f.Messages(queue)))
	}
}

// FuzzParkedRecordComesBack: whatever a record holds, its parked message
// is one SQS takes, and reads back as it was parked.
func FuzzParkedRecordComesBack(f *testing.F) {
	f.Add([]byte(`{"messageId":"m1","body":"{\"entity\":\"<u>\"}","attributes":{"SentTimestamp":"1"}}`), uint8(0), "why")
	f.Add([]byte(`{"Sns":{"MessageId":"s","Message":"\u0000\uffff","Timestamp":"2026-12-01T00:00:00Z"}}`), uint8(1), "\xff")
	f.Add([]byte(`{"dynamodb":{"NewImage":{"a":{"S":"b"}}}}`), uint8(2), "")
	sources := []events.Source{events.SourceSQS, events.SourceSNS, events.SourceDynamoDB}
	f.Fuzz(func(t *testing.T, raw []byte, source uint8, reason string) {
		r := newFrom(sources[int(source)%len(sources)], "fn", "", reason, raw, time.Now())
		back, errs := park(t, r)
		if errors.Is(errs[0], errTooLarge) || len(raw) == 0 && errs[0] != nil {
			return
		}
		if errs[0] != nil || len(back) != 1 {
			t.Fatalf("%q: %v", raw, errs[0])
		}
		if back[0].Content != r.Content || string(back[0].Data) != string(r.Data) || back[0].Source != r.Source {
			t.Fatalf("%q: parked %s %q, read back %s %q", raw, r.Content, r.Data, back[0].Content, back[0].Data)
		}
	})
}
