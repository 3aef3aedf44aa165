package parking

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/localstack/fakes"
)

const queue = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-failures"

func TestAParkedRecordComesBackWhole(t *testing.T) {
	for name, raw := range map[string]string{
		"valid JSON":   `{"messageId":"m1","body":"{\"entity\":\"user\"}"}`,
		"broken JSON":  `{"messageId":"m1","body":"{`,
		"invalid utf8": "{\"body\":\"\xff\xfe\"}",
		"U+FFFF":       "{\"body\":\"\uffff\"}",
	} {
		t.Run(name, func(t *testing.T) {
			r := New(events.SourceSQS, "sqs-invalidate", "m1", "why\uffff\xff", []byte(raw), time.Now())
			body, err := r.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if !sqsSafe(string(body)) {
				t.Fatalf("SQS would refuse %q", body)
			}
			back, ok, err := Parse(body)
			if !ok || err != nil || !bytes.Equal(back.Content(), []byte(raw)) || back.Source != events.SourceSQS || back.ID != "m1" {
				t.Fatalf("parsed %+v (%v, %v), want the record back byte for byte", back, ok, err)
			}
			if !strings.HasPrefix(back.Reason, "why") {
				t.Fatalf("reason %q", back.Reason)
			}
		})
	}
}

func TestAStreamRecordTooLargeIsKeptWithoutItsImages(t *testing.T) {
	big := strings.Repeat("x", MaxBytes)
	raw, _ := json.Marshal(map[string]any{"eventName": "MODIFY", "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/T/stream/L",
		"dynamodb": map[string]any{"SequenceNumber": "100", "Keys": map[string]any{"id": map[string]string{"S": "1"}},
			"NewImage": map[string]any{"blob": map[string]string{"S": big}}}})
	r := New(events.SourceDynamoDB, "stream-invalidate", "100", "cannot plan", raw, time.Now())
	body, err := r.Encode()
	if err != nil || len(body) > MaxBytes {
		t.Fatalf("%d bytes, %v: want it under %d", len(body), err, MaxBytes)
	}
	back, _, _ := Parse(body)
	if !back.Truncated || strings.Contains(string(back.Content()), "NewImage") || !strings.Contains(string(back.Content()), `"SequenceNumber":"100"`) {
		t.Fatalf("parked %s: want the record without its images, its coordinates kept", back.Content())
	}
	// Anything else that large cannot be parked: it stays with its source.
	r = New(events.SourceSQS, "sqs-invalidate", "m1", "malformed", []byte(`"`+big+`"`), time.Now())
	if _, err := r.Encode(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestParkSaysWhatWasNotParked(t *testing.T) {
	sqs := &fakes.SQS{}
	ok := New(events.SourceSNS, "sns-invalidate", "a", "bad", []byte(`{}`), time.Now())
	huge := New(events.SourceSNS, "sns-invalidate", "b", "bad", []byte(`"`+strings.Repeat("x", MaxBytes)+`"`), time.Now())
	errs := Queue{Client: sqs, URL: queue}.Park(context.Background(), []Record{ok, huge})
	if errs[0] != nil || !errors.Is(errs[1], ErrTooLarge) || len(sqs.Messages(queue)) != 1 {
		t.Fatalf("errs %v, %d sent: want the first parked, the second refused", errs, len(sqs.Messages(queue)))
	}
	if _, isParked, _ := Parse([]byte(`{"DDBStreamBatchInfo":{}}`)); isParked {
		t.Fatal("an on-failure record taken for a parked one")
	}
}
