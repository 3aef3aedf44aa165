package fakes

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/invalidate"
)

// ErrRefused stands for a refused connection to the cache, which valkey-go
// returns as the dialer's error.
var ErrRefused error = &dialError{syscall.ECONNREFUSED}

type dialError struct{ errno syscall.Errno }

func (e *dialError) Error() string { return "dial tcp 127.0.0.1:7001: " + e.errno.Error() }
func (e *dialError) Unwrap() error { return e.errno }

// Cache is an invalidate.Cache in memory, for tests that need nothing
// running: every key is deleted, unless Fail, when set, says it fails at
// that attempt (counted from 1 per key).
type Cache struct {
	Fail     func(key string, attempt int) error
	mu       sync.Mutex
	attempts map[string]int
}

// Unlink is invalidate.Cache's.
func (f *Cache) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attempts == nil {
		f.attempts = map[string]int{}
	}
	var errs []error
	for i, k := range keys {
		f.attempts[k]++
		err := ctx.Err()
		if err == nil && f.Fail != nil {
			err = f.Fail(k, f.attempts[k])
		}
		if err == nil {
			status[i] = invalidate.KeyDeleted
			continue
		}
		if errs == nil {
			errs = make([]error, len(keys))
		}
		status[i], errs[i] = invalidate.KeyFailed, err
	}
	return errs
}

// Attempts tells how many times key was sent.
func (f *Cache) Attempts(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[key]
}

// SQS is SQS in memory, for tests that need nothing running: queues by
// URL, made when first used, with receive counts and visibility timeouts.
// Fail, when set, may fail a call by its name ("SendMessage"...).
type SQS struct {
	Fail   func(op string) error
	mu     sync.Mutex
	queues map[string][]*Message
	serial int
}

// Message is a message of an SQS queue.
type Message struct {
	ID, Body, Handle string
	Receives         int
	Sent, VisibleAt  time.Time
	Deleted          bool
}

func (f *SQS) fail(op string) error {
	if f.Fail != nil {
		return f.Fail(op)
	}
	return nil
}

// Messages returns copies of the messages of queue url, deleted ones
// included.
func (f *SQS) Messages(url string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
	for _, m := range f.queues[url] {
		out = append(out, *m)
	}
	return out
}

// Send puts a message in queue url and returns its ID.
func (f *SQS) Send(url, body string) string { return f.send(url, body, 0) }

// send puts a message in queue url, visible after delay.
func (f *SQS) send(url, body string, delay time.Duration) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queues == nil {
		f.queues = map[string][]*Message{}
	}
	f.serial++
	id := fmt.Sprintf("msg-%d", f.serial)
	now := time.Now()
	f.queues[url] = append(f.queues[url], &Message{ID: id, Body: body, Sent: now, VisibleAt: now.Add(delay)})
	return id
}

// SendMessage is sqs.Client's, DelaySeconds included.
func (f *SQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := f.fail("SendMessage"); err != nil {
		return nil, err
	}
	id := f.send(aws.ToString(in.QueueUrl), aws.ToString(in.MessageBody), time.Duration(in.DelaySeconds)*time.Second)
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

// ReceiveMessage is sqs.Client's, long polling included.
func (f *SQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if err := f.fail("ReceiveMessage"); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Duration(in.WaitTimeSeconds) * time.Second)
	for {
		if msgs := f.take(aws.ToString(in.QueueUrl), int(max(in.MaxNumberOfMessages, 1)), time.Duration(in.VisibilityTimeout)*time.Second); len(msgs) > 0 || time.Now().After(deadline) {
			return &sqs.ReceiveMessageOutput{Messages: msgs}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *SQS) take(url string, n int, visibility time.Duration) []types.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	now := time.Now()
	var out []types.Message
	for _, m := range f.queues[url] {
		if len(out) == n {
			break
		}
		if m.Deleted || m.VisibleAt.After(now) {
			continue
		}
		f.serial++
		m.Receives++
		m.Handle = "handle-" + strconv.Itoa(f.serial)
		m.VisibleAt = now.Add(visibility)
		out = append(out, types.Message{
			MessageId: aws.String(m.ID), Body: aws.String(m.Body), ReceiptHandle: aws.String(m.Handle),
			Attributes: map[string]string{
				"ApproximateReceiveCount": strconv.Itoa(m.Receives), "SentTimestamp": strconv.FormatInt(m.Sent.UnixMilli(), 10),
			},
		})
	}
	return out
}

// byHandle finds the message a receipt handle names; f.mu is held.
func (f *SQS) byHandle(url, handle string) *Message {
	for _, m := range f.queues[url] {
		if m.Handle == handle && !m.Deleted {
			return m
		}
	}
	return nil
}

// DeleteMessageBatch is sqs.Client's.
func (f *SQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if err := f.fail("DeleteMessageBatch"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		if m := f.byHandle(aws.ToString(in.QueueUrl), aws.ToString(e.ReceiptHandle)); m != nil {
			m.Deleted = true
			out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
		} else {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("no such receipt handle")})
		}
	}
	return out, nil
}

// ChangeMessageVisibilityBatch is sqs.Client's.
func (f *SQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if err := f.fail("ChangeMessageVisibilityBatch"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if m := f.byHandle(aws.ToString(in.QueueUrl), aws.ToString(e.ReceiptHandle)); m != nil {
			m.VisibleAt = time.Now().Add(time.Duration(e.VisibilityTimeout) * time.Second)
			out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		} else {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("no such receipt handle")})
		}
	}
	return out, nil
}
