package queuestest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS is SQS in memory, for tests that need nothing running: queues by
// URL, made when first used, with receive counts, visibility timeouts and
// delays, and the attributes a receive asks for; every receipt handle a
// message had still deletes it or changes its visibility, as in SQS. No
// redrive policy: a message is received however often it comes back.
// Fail, when set, may fail a call by its name ("SendMessage"...).
//
// SendMessage refuses what SQS refuses and moto lets through: a message
// over its queue's MaximumMessageSize counting its attributes (each name,
// type and value), more than 10 attributes, an empty attribute value, and
// characters SQS does not take in a body or a string value.
type SQS struct {
	Fail func(op string) error
	// MaxBytes is each queue's MaximumMessageSize, by URL. Default
	// 1 MiB, SQS's most.
	MaxBytes map[string]int
	mu       sync.Mutex
	queues   map[string][]*Message
	serial   int
}

// Message is a message of an SQS queue.
type Message struct {
	ID, Body, Handle string
	Attributes       map[string]types.MessageAttributeValue
	Receives         int
	Sent, VisibleAt  time.Time
	Deleted          bool
	handles          []string // every one it was received with
}

// MaxMessageBytes is SQS's largest message, MaximumMessageSize's most.
const maxMessageBytes = 1 << 20

// ErrInvalidMessage is SendMessage's error for a message SQS refuses.
var errInvalidMessage = errors.New("InvalidParameterValue")

// check returns why SQS would refuse to send in, if it would.
func (f *SQS) check(in *sqs.SendMessageInput) error {
	limit := maxMessageBytes
	if n, ok := f.MaxBytes[aws.ToString(in.QueueUrl)]; ok {
		limit = n
	}
	body := aws.ToString(in.MessageBody)
	size := len(body)
	switch {
	case body == "":
		return fmt.Errorf("%w: the message body is empty", errInvalidMessage)
	case !sqsText(body):
		return fmt.Errorf("%w: the body holds characters SQS does not take", errInvalidMessage)
	case len(in.MessageAttributes) > 10:
		return fmt.Errorf("%w: %d message attributes, the most is 10", errInvalidMessage, len(in.MessageAttributes))
	}
	for name, v := range in.MessageAttributes {
		value := aws.ToString(v.StringValue)
		switch {
		case aws.ToString(v.DataType) == "":
			return fmt.Errorf("%w: attribute %s has no type", errInvalidMessage, name)
		case v.BinaryValue == nil && value == "":
			return fmt.Errorf("%w: attribute %s is empty", errInvalidMessage, name)
		case !sqsText(value):
			return fmt.Errorf("%w: attribute %s holds characters SQS does not take", errInvalidMessage, name)
		}
		size += len(name) + len(aws.ToString(v.DataType)) + len(value) + len(v.BinaryValue)
	}
	if size > limit {
		return fmt.Errorf("%w: a message of %d bytes with its attributes, the queue takes %d", errInvalidMessage, size, limit)
	}
	return nil
}

// sqsText says whether s holds only the characters SQS takes: tab, line
// feed, carriage return, U+0020 to U+D7FF, U+E000 to U+FFFD, U+10000 to
// U+10FFFF, in valid UTF-8.
func sqsText(s string) bool {
	for i, r := range s {
		switch {
		case r < ' ' && r != '\t' && r != '\n' && r != '\r', r == 0xFFFE, r == 0xFFFF:
			return false
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false // invalid UTF-8, not U+FFFD itself
			}
		}
	}
	return true
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
func (f *SQS) Send(url, body string) string {
	return f.send(&sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
}

// send puts a message in its queue, visible after its delay.
func (f *SQS) send(in *sqs.SendMessageInput) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queues == nil {
		f.queues = map[string][]*Message{}
	}
	f.serial++
	id := fmt.Sprintf("msg-%d", f.serial)
	now := time.Now()
	url := aws.ToString(in.QueueUrl)
	f.queues[url] = append(f.queues[url], &Message{ID: id, Body: aws.ToString(in.MessageBody), Attributes: maps.Clone(in.MessageAttributes),
		Sent: now, VisibleAt: now.Add(time.Duration(in.DelaySeconds) * time.Second)})
	return id
}

// SendMessage is sqs.Client's, DelaySeconds and message attributes
// included.
func (f *SQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := f.fail("SendMessage"); err != nil {
		return nil, err
	}
	if err := f.check(in); err != nil {
		return nil, err
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(f.send(in))}, nil
}

// SendMessageBatch is sqs.Client's: each entry sent as SendMessage sends
// it, with its own delay; one SQS refuses fails alone, as in SQS. The
// batch's bodies together may take 1 MiB.
func (f *SQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := f.fail("SendMessageBatch"); err != nil {
		return nil, err
	}
	total := 0
	for _, e := range in.Entries {
		total += len(aws.ToString(e.MessageBody))
	}
	if len(in.Entries) == 0 || len(in.Entries) > 10 || total > maxMessageBytes {
		return nil, errInvalidMessage
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		one := &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds, MessageAttributes: e.MessageAttributes}
		if err := f.check(one); err != nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String(err.Error()), SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(f.send(one))})
	}
	return out, nil
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
			Attributes: attributes(in, m), MessageAttributes: messageAttributes(in, m)})
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

// messageAttributes are those of m's message attributes that in asks for,
// by name, by a prefix ending in .*, or all (All, .*).
func messageAttributes(in *sqs.ReceiveMessageInput, m *Message) map[string]types.MessageAttributeValue {
	var out map[string]types.MessageAttributeValue
	for name, v := range m.Attributes {
		if slices.ContainsFunc(in.MessageAttributeNames, func(asked string) bool {
			prefix, wild := strings.CutSuffix(asked, ".*")
			return asked == "All" || asked == ".*" || asked == name || wild && strings.HasPrefix(name, prefix+".")
		}) {
			if out == nil {
				out = map[string]types.MessageAttributeValue{}
			}
			out[name] = v
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
