package queues_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

const testURL = "https://sqs.us-east-1.amazonaws.com/1/q"

// TestAMessageGoesRoundTheQueue sends 25 messages, one with attributes,
// receives them, hands some back and deletes the rest, in batches of ten.
func TestAMessageGoesRoundTheQueue(t *testing.T) {
	fake := &queuestest.SQS{}
	var calls []string
	fake.Fail = func(op string) error { calls = append(calls, op); return nil }
	out := []queues.Outgoing{{Body: "with", Attributes: map[string]string{"reason": "why"}}}
	for i := range 24 {
		out = append(out, queues.Outgoing{Body: strconv.Itoa(i)})
	}
	if err := queues.Send(t.Context(), fake, testURL, out[:1]...); err != nil {
		t.Fatal(err)
	}
	for start := 1; start < len(out); start += 10 {
		if err := queues.Send(t.Context(), fake, testURL, out[start:min(start+10, len(out))]...); err != nil {
			t.Fatal(err)
		}
	}
	if got := queues.Strings(fake.Messages(testURL)[0].Attributes); got["reason"] != "why" || len(got) != 1 {
		t.Errorf("attributes %v, want reason: why", got)
	}
	var got []queues.Message
	for len(got) < len(out) {
		msgs, _, err := queues.Receive(t.Context(), fake, testURL, 10, 0, time.Minute)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("received %d of %d: %v", len(got), len(out), err)
		}
		got = append(got, msgs...)
	}
	var back []queues.Return
	var done []string
	for i, m := range got {
		if m.Receives != 1 || m.SentTimestamp == "" || m.Handle == "" {
			t.Errorf("message %d: %+v, want its handle, sent time and one receive", i, m)
		}
		if i%2 == 0 {
			back = append(back, queues.Return{Handle: m.Handle})
		} else {
			done = append(done, m.Handle)
		}
	}
	calls = nil
	if err := queues.HandBack(t.Context(), fake, testURL, back); err != nil {
		t.Fatal(err)
	}
	if err := queues.Delete(t.Context(), fake, testURL, done); err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("ChangeMessageVisibilityBatch ", 2) + strings.Repeat("DeleteMessageBatch ", 2); strings.Join(calls, " ")+" " != want {
		t.Errorf("calls %q, want %q", calls, want)
	}
	again, _, err := queues.Receive(t.Context(), fake, testURL, 10, 0, time.Minute)
	if err != nil || len(again) != 10 || again[0].Receives != 2 {
		t.Errorf("received again %d messages (%v), want 10 handed back, each its second receive", len(again), err)
	}
}

// TestSizeIsWhatSQSCounts: a message of MaxBytes by Size is taken, one
// byte more is refused, as the fake refuses what SQS does.
func TestSizeIsWhatSQSCounts(t *testing.T) {
	fake := &queuestest.SQS{MaxBytes: map[string]int{testURL: 1000}}
	m := queues.Outgoing{Attributes: map[string]string{"reason": "x", "source": "sqs"}}
	m.Body = strings.Repeat("b", 1000-m.Size())
	if err := queues.Send(t.Context(), fake, testURL, m); err != nil {
		t.Errorf("a message of %d bytes by Size: %v", m.Size(), err)
	}
	m.Body += "b"
	if err := queues.Send(t.Context(), fake, testURL, m); err == nil {
		t.Errorf("a message of %d bytes by Size was taken by a queue of 1000", m.Size())
	}
}

// TestAFailedEntryFailsTheCall: an entry SQS refuses in a batch is the
// call's error.
func TestAFailedEntryFailsTheCall(t *testing.T) {
	fake := &queuestest.SQS{}
	if err := queues.HandBack(t.Context(), fake, testURL, []queues.Return{{Handle: "no such handle"}}); err == nil {
		t.Error("handing back an unknown receipt handle: no error")
	}
	fake.Fail = func(op string) error { return errors.New(op + " refused") }
	if err := queues.Send(t.Context(), fake, testURL, queues.Outgoing{Body: "a"}, queues.Outgoing{Body: "b"}); err == nil || !strings.Contains(err.Error(), "SendMessageBatch") {
		t.Errorf("a batch refused: %v", err)
	}
}
