package esm_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/localstack/esm"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// batches is a function that records the size of each batch it is invoked
// with and fails none.
type batches struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batches) Invoke(_ context.Context, ev any) ([]byte, error) {
	payload, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	var got struct{ Records []json.RawMessage }
	if err := json.Unmarshal(payload, &got); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, len(got.Records))
	return []byte(`{"batchItemFailures":[]}`), nil
}

func (b *batches) total() (n int, sizes []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sizes {
		n += s
	}
	return n, append([]int(nil), b.sizes...)
}

// queueOf makes a queue named from prefix, removed after the test, holding
// tens times 10 change messages.
func queueOf(t *testing.T, prefix string, tens int) (*sqs.Client, *sqs.CreateQueueOutput) {
	c := awsenv.SQS(t)
	q, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(prefix + strings.ToLower(rand.Text()[:12]))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	for i := range tens {
		var entries []types.SendMessageBatchRequestEntry
		for j := range 10 {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)),
				MessageBody: aws.String(`{"entity":"product","id":"` + strconv.Itoa(i*10+j) + `"}`)})
		}
		if _, err := c.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries}); err != nil {
			t.Fatal(err)
		}
	}
	return c, q
}

// TestBatchingWindowGathersReceives: with a window, a batch larger than
// SQS's 10 per receive gathers from several receives into one invoke, and
// its messages are deleted in chunks of 10.
func TestBatchingWindowGathersReceives(t *testing.T) {
	c, q := queueOf(t, "test-window-", 3)
	fn := &batches{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- (&esm.SQSMapping{Client: c, QueueURL: *q.QueueUrl, WaitTime: time.Second, Functions: []esm.Invoker{fn}, BatchSize: 25, BatchingWindow: 2 * time.Second,
			Logger: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n, _ := fn.total(); n >= 30 {
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, sizes := fn.total(); n != 30 || sizes[0] != 25 {
		t.Fatalf("invoked with batches %v, want 25 then the other 5", sizes)
	}
	attrs, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range attrs.Attributes {
		if v != "0" {
			t.Errorf("%s = %s after the batches: not every message was deleted", name, v)
		}
	}
}

// slow is a function whose invokes take a while, counting how many run at
// once.
type slow struct {
	batches
	now, peak atomic.Int32
}

func (s *slow) Invoke(ctx context.Context, ev any) ([]byte, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	time.Sleep(300 * time.Millisecond)
	return s.batches.Invoke(ctx, ev)
}

// TestAMappingScalesWithTheBacklog: one steady receive loop, but full
// batches bring more, one invoker each, as Lambda adds batches at once
// while messages keep coming.
func TestAMappingScalesWithTheBacklog(t *testing.T) {
	c, q := queueOf(t, "test-scale-", 10)
	fn := &slow{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- (&esm.SQSMapping{Client: c, QueueURL: *q.QueueUrl, WaitTime: time.Second, Functions: []esm.Invoker{fn, fn, fn}, Steady: 1,
			Logger: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n, _ := fn.total(); n >= 100 {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := fn.total(); n < 100 || fn.peak.Load() < 2 || fn.peak.Load() > 3 {
		t.Fatalf("%d messages, at most %d batches at once: want all 100, and more than the steady loop's one, at most the 3 invokers", n, fn.peak.Load())
	}
}

// TestAStoppedMappingHandsBack: what a mapping received but had not
// invoked when it was stopped is visible again at once, not after the
// queue's visibility timeout (AWS's pollers never vanish mid-batch).
func TestAStoppedMappingHandsBack(t *testing.T) {
	c, q := queueOf(t, "test-stop-", 3)
	fn := &batches{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		// A window longer than the test: the batch is still gathering when stopped.
		done <- (&esm.SQSMapping{Client: c, QueueURL: *q.QueueUrl, WaitTime: time.Second, Functions: []esm.Invoker{fn}, Steady: 1, BatchSize: 100,
			BatchingWindow: time.Minute, Logger: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	visible := func() string {
		attrs, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			t.Fatal(err)
		}
		return attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
	}
	for deadline := time.Now().Add(10 * time.Second); visible() != "0" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := fn.total(); n != 0 {
		t.Fatalf("%d messages invoked after the stop, want none", n)
	}
	// Two reads that agree: moto counts visible messages in a pass of its own.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if a, b := visible(), visible(); a == "30" && b == "30" {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%s of 30 messages visible after the stop: the rest stay hidden until their visibility timeout", b)
		}
	}
}
