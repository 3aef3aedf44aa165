package fakes

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/invalidate"
)

// ErrRefused stands for a refused connection to the cache, which valkey-go
// returns as the dialer's error.
var ErrRefused error = &dialError{syscall.ECONNREFUSED}

type dialError struct{ errno syscall.Errno }

func (e *dialError) Error() string { return "dial tcp 127.0.0.1:7001: " + e.errno.Error() }
func (e *dialError) Unwrap() error { return e.errno }

// ErrNoPerm is the cache's refusal of a key to the user, the reply of
// Valkey and Redis 7 in the type valkey-go gives it, so that the code
// classes it as the real one: failed for good.
var ErrNoPerm = ErrorReply("NOPERM this user has no permissions to access one of the keys used as arguments")

// ErrorReply is the error reply msg as valkey-go reads it, for fakes that
// answer what a server would (WRONGTYPE, a script's error). Its only
// exported constructor of one is the reader of its client-side cache
// format: 7 bytes of TTL, the type, the length, the string. The contract
// test (localstack/testenv/contract) checks it against the real one.
func ErrorReply(msg string) error {
	buf := binary.BigEndian.AppendUint64(append(make([]byte, 7), '-'), uint64(len(msg)))
	var m valkey.ValkeyMessage
	if err := m.CacheUnmarshalView(append(buf, msg...)); err != nil {
		panic(err)
	}
	return m.Error()
}

// Cache is an invalidate.Cache and TagCache in memory, for tests that need
// nothing running. It holds every key until the key is deleted, and again
// once Set: a key is deleted once, then absent. Its tags hold the keys
// Tag registers in them until they are forgotten. Fail, when set, says
// that a key — or the key of a tag, for each page of it — fails at that
// attempt (counted from 1 per key), ErrRefused for a node down, ErrNoPerm
// for a key refused to the user.
type Cache struct {
	Fail     func(key string, attempt int) error
	mu       sync.Mutex
	attempts map[string]int
	deleted  map[string]bool              // since last Set
	tags     map[string]map[string]string // tag key → member → registration
	cursors  map[uint64]string            // a page's cursor → the last key before it
	clock    int64
}

// Tag stores keys and registers them in the tag at key, as fills of
// writethrough would.
func (f *Cache) Tag(key string, keys ...string) {
	f.Set(keys...)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tags == nil {
		f.tags = map[string]map[string]string{}
	}
	if f.tags[key] == nil {
		f.tags[key] = map[string]string{}
	}
	for _, k := range keys {
		f.clock++
		f.tags[key][k] = strconv.FormatInt(f.clock, 10)
	}
}

// Members are the keys registered in the tag at key.
func (f *Cache) Members(key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.tags[key]))
}

// Tick is invalidate.TagCache's.
func (f *Cache) Tick(ctx context.Context, clock string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock++
	return f.clock, ctx.Err()
}

// Page is invalidate.TagCache's: the members in key order.
func (f *Cache) Page(ctx context.Context, key string, reading int64, cursor uint64, count int) ([]invalidate.Member, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attempts == nil {
		f.attempts, f.deleted = map[string]int{}, map[string]bool{}
	}
	f.attempts[key]++
	err := ctx.Err()
	if err == nil && f.Fail != nil {
		err = f.Fail(key, f.attempts[key])
	}
	if err != nil {
		return nil, 0, err
	}
	keys := slices.Sorted(maps.Keys(f.tags[key]))
	if cursor > 0 { // after the last key of the page before
		after := f.cursors[cursor]
		keys = slices.DeleteFunc(keys, func(k string) bool { return k <= after })
	}
	var page []invalidate.Member
	for _, k := range keys[:min(max(count, 1), len(keys))] {
		page = append(page, invalidate.Member{Key: k, Registration: f.tags[key][k]})
	}
	if len(page) == len(keys) {
		return page, 0, nil
	}
	if f.cursors == nil {
		f.cursors = map[uint64]string{}
	}
	next := uint64(len(f.cursors) + 1)
	f.cursors[next] = page[len(page)-1].Key
	return page, next, nil
}

// Forget is invalidate.TagCache's.
func (f *Cache) Forget(ctx context.Context, key string, members []invalidate.Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range members {
		if f.tags[key][m.Key] == m.Registration {
			delete(f.tags[key], m.Key)
		}
	}
	return ctx.Err()
}

// Set stores keys again, as a service filling the cache would.
func (f *Cache) Set(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.deleted, k)
	}
}

// Unlink is invalidate.Cache's.
func (f *Cache) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attempts == nil {
		f.attempts, f.deleted = map[string]int{}, map[string]bool{}
	}
	var errs []error
	for i, k := range keys {
		f.attempts[k]++
		err := ctx.Err()
		if err == nil && f.Fail != nil {
			err = f.Fail(k, f.attempts[k])
		}
		switch {
		case err == nil && f.deleted[k]:
			status[i] = invalidate.KeyAbsent
		case err == nil:
			status[i], f.deleted[k] = invalidate.KeyDeleted, true
		default:
			if errs == nil {
				errs = make([]error, len(keys))
			}
			status[i], errs[i] = invalidate.KeyFailed, err
		}
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
// URL, made when first used, with receive counts, visibility timeouts and
// delays, and the attributes a receive asks for; every receipt handle a
// message had still deletes it or changes its visibility, as in SQS. No
// redrive policy: a message is received however often it comes back.
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
	handles          []string // every one it was received with
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
		if msgs := f.take(in); len(msgs) > 0 || time.Now().After(deadline) {
			return &sqs.ReceiveMessageOutput{Messages: msgs}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *SQS) take(in *sqs.ReceiveMessageInput) []types.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	visibility := time.Duration(in.VisibilityTimeout) * time.Second
	if visibility <= 0 {
		visibility = 30 * time.Second
	}
	n, now := int(max(in.MaxNumberOfMessages, 1)), time.Now()
	var out []types.Message
	for _, m := range f.queues[aws.ToString(in.QueueUrl)] {
		if len(out) == n {
			break
		}
		if m.Deleted || m.VisibleAt.After(now) {
			continue
		}
		f.serial++
		m.Receives++
		m.Handle = "handle-" + strconv.Itoa(f.serial)
		m.handles = append(m.handles, m.Handle)
		m.VisibleAt = now.Add(visibility)
		out = append(out, types.Message{MessageId: aws.String(m.ID), Body: aws.String(m.Body), ReceiptHandle: aws.String(m.Handle),
			Attributes: attributes(in, m)})
	}
	return out
}

// attributes are those of m's system attributes that in asks for: SQS
// returns no others.
func attributes(in *sqs.ReceiveMessageInput, m *Message) map[string]string {
	var out map[string]string
	for name, value := range map[types.MessageSystemAttributeName]string{
		types.MessageSystemAttributeNameApproximateReceiveCount: strconv.Itoa(m.Receives),
		types.MessageSystemAttributeNameSentTimestamp:           strconv.FormatInt(m.Sent.UnixMilli(), 10),
	} {
		if slices.Contains(in.MessageSystemAttributeNames, name) || slices.Contains(in.MessageSystemAttributeNames, types.MessageSystemAttributeNameAll) {
			if out == nil {
				out = map[string]string{}
			}
			out[string(name)] = value
		}
	}
	return out
}

// byHandle finds the message that was received with handle, deleted or
// not; f.mu is held.
func (f *SQS) byHandle(url, handle string) *Message {
	for _, m := range f.queues[url] {
		if slices.Contains(m.handles, handle) {
			return m
		}
	}
	return nil
}

// handleError fails entry id of a batch for its receipt handle.
func handleError(id *string) types.BatchResultErrorEntry {
	return types.BatchResultErrorEntry{Id: id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("no such receipt handle"), SenderFault: true}
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
		// Deleting a deleted message again succeeds.
		if m := f.byHandle(aws.ToString(in.QueueUrl), aws.ToString(e.ReceiptHandle)); m != nil {
			m.Deleted = true
			out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
		} else {
			out.Failed = append(out.Failed, handleError(e.Id))
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
		if m := f.byHandle(aws.ToString(in.QueueUrl), aws.ToString(e.ReceiptHandle)); m != nil && !m.Deleted {
			m.VisibleAt = time.Now().Add(time.Duration(e.VisibilityTimeout) * time.Second)
			out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		} else {
			out.Failed = append(out.Failed, handleError(e.Id))
		}
	}
	return out, nil
}
