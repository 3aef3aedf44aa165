package hostile

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/valkey-io/valkey-go"
)

// AWS's limits on what the worker sends (SQS developer guide, "Amazon SQS
// message quotas"; ElastiCache Serverless's request limit).
const (
	maxBatchEntries  = 10
	maxBatchBytes    = 1 << 20
	maxVisibility    = 43200 // seconds
	maxDelay         = 900   // seconds
	maxAttributes    = 10
	maxCacheArgs     = 3999
	defaultQueueSize = 262144 // MaximumMessageSize of a queue that sets none
)

// backend is what the limits pass calls on to: queuestest.SQS or moto's client.
type backend interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// limited is the SQS client the worker and the poller are given: every
// call is checked against SQS's limits, the receiving queue's
// MaximumMessageSize included, and one over a limit is refused, as SQS
// would refuse it, and noted. It counts the messages sent to each queue,
// and notes which were received and deleted (the poller's answer).
// Messages sent to a queue that keep is false for are checked and
// counted, not kept: the fakes' failure and delay queues, whose bodies
// would otherwise count in the memory a row retains.
type limited struct {
	next    backend
	maxSize map[string]int // by queue name
	keep    func(queue string) bool

	mu         sync.Mutex
	violations []string
	sent       map[string]int    // messages, by queue name
	handles    map[string]string // receipt handle → message ID
	received   map[string]int
	deleted    map[string]bool
	serial     int
}

func newLimited(next backend, maxSize map[string]int, keep func(string) bool) *limited {
	return &limited{next: next, maxSize: maxSize, keep: keep, sent: map[string]int{}, handles: map[string]string{},
		received: map[string]int{}, deleted: map[string]bool{}}
}

// errLimit is SQS's refusal of a call over a limit.
var errLimit = errors.New("refused by SQS")

func (l *limited) refuse(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.violations = append(l.violations, msg)
	l.mu.Unlock()
	return fmt.Errorf("%w: %s", errLimit, msg)
}

// Violations are the calls refused, each with why.
func (l *limited) Violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.violations...)
}

// Sent counts the messages sent to queue name.
func (l *limited) Sent(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent[name]
}

func queueName(url string) string { return path.Base(url) }

// sqsText says what SQS refuses in a message's text, if anything: it takes
// #x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD and #x10000 to #x10FFFF,
// in valid UTF-8.
func sqsText(s string) string {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if !(r == 0x9 || r == 0xA || r == 0xD || 0x20 <= r && r <= 0xD7FF || 0xE000 <= r && r <= 0xFFFD || 0x10000 <= r && r <= 0x10FFFF) {
			return fmt.Sprintf("character %U at byte %d", r, i)
		}
	}
	return ""
}

// message checks one message to queue url and returns its size as SQS
// counts it: the body and each attribute's name, type and value.
func (l *limited) message(op, url string, body *string, delay int32, attrs map[string]types.MessageAttributeValue) (int, error) {
	name := queueName(url)
	limit, ok := l.maxSize[name]
	if !ok {
		return 0, l.refuse("%s to %s: no such queue", op, name)
	}
	size := len(aws.ToString(body))
	if bad := sqsText(aws.ToString(body)); bad != "" {
		return 0, l.refuse("%s to %s: the body holds what SQS refuses: %s", op, name, bad)
	}
	if len(attrs) > maxAttributes {
		return 0, l.refuse("%s to %s: %d message attributes, SQS takes %d", op, name, len(attrs), maxAttributes)
	}
	for k, v := range attrs {
		size += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
		if bad := sqsText(aws.ToString(v.StringValue)); bad != "" {
			return 0, l.refuse("%s to %s: attribute %s holds what SQS refuses: %s", op, name, k, bad)
		}
	}
	if size > limit {
		return 0, l.refuse("%s to %s: a message of %d bytes (body %d), the queue's MaximumMessageSize is %d", op, name, size, len(aws.ToString(body)), limit)
	}
	if delay < 0 || delay > maxDelay {
		return 0, l.refuse("%s to %s: DelaySeconds %d, SQS takes 0 to %d", op, name, delay, maxDelay)
	}
	return size, nil
}

// SendMessage is sqs.Client's.
func (l *limited) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if _, err := l.message("SendMessage", aws.ToString(in.QueueUrl), in.MessageBody, in.DelaySeconds, in.MessageAttributes); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.sent[queueName(aws.ToString(in.QueueUrl))]++
	l.mu.Unlock()
	if !l.keep(queueName(aws.ToString(in.QueueUrl))) {
		l.mu.Lock()
		l.serial++
		id := fmt.Sprintf("dropped-%d", l.serial)
		l.mu.Unlock()
		return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
	}
	return l.next.SendMessage(ctx, in, opts...)
}

// checkIDs checks a batch's entry IDs: at most 10 entries, each ID unique,
// up to 80 of alphanumerics, hyphens and underscores.
func (l *limited) checkIDs(op, url string, ids []string) error {
	if len(ids) == 0 || len(ids) > maxBatchEntries {
		return l.refuse("%s to %s: %d entries, SQS takes 1 to %d", op, queueName(url), len(ids), maxBatchEntries)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || id == "" || len(id) > 80 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return l.refuse("%s to %s: entry ID %q is a repeat or not 1-80 of A-Z a-z 0-9 - _", op, queueName(url), id)
		}
		seen[id] = true
	}
	return nil
}

// SendMessageBatch is sqs.Client's: checked as a batch, sent one by one.
func (l *limited) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	url := aws.ToString(in.QueueUrl)
	ids := make([]string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = aws.ToString(e.Id)
		size, err := l.message("SendMessageBatch", url, e.MessageBody, e.DelaySeconds, e.MessageAttributes)
		if err != nil {
			return nil, err
		}
		total += size
	}
	if err := l.checkIDs("SendMessageBatch", url, ids); err != nil {
		return nil, err
	}
	if total > maxBatchBytes {
		return nil, l.refuse("SendMessageBatch to %s: %d bytes in all, SQS takes %d", queueName(url), total, maxBatchBytes)
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		res, err := l.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds,
			MessageAttributes: e.MessageAttributes}, opts...)
		if err != nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String(err.Error())})
			continue
		}
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: res.MessageId})
	}
	return out, nil
}

// ReceiveMessage is sqs.Client's, noting each message received.
func (l *limited) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if in.MaxNumberOfMessages < 0 || in.MaxNumberOfMessages > maxBatchEntries || in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > 20 ||
		in.VisibilityTimeout < 0 || in.VisibilityTimeout > maxVisibility {
		return nil, l.refuse("ReceiveMessage from %s: MaxNumberOfMessages %d, WaitTimeSeconds %d, VisibilityTimeout %d out of range",
			queueName(aws.ToString(in.QueueUrl)), in.MaxNumberOfMessages, in.WaitTimeSeconds, in.VisibilityTimeout)
	}
	out, err := l.next.ReceiveMessage(ctx, in, opts...)
	if err == nil {
		l.mu.Lock()
		for _, m := range out.Messages {
			l.handles[aws.ToString(m.ReceiptHandle)] = aws.ToString(m.MessageId)
			l.received[aws.ToString(m.MessageId)]++
		}
		l.mu.Unlock()
	}
	return out, err
}

// DeleteMessageBatch is sqs.Client's, noting each message deleted.
func (l *limited) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = aws.ToString(e.Id)
	}
	if err := l.checkIDs("DeleteMessageBatch", aws.ToString(in.QueueUrl), ids); err != nil {
		return nil, err
	}
	out, err := l.next.DeleteMessageBatch(ctx, in, opts...)
	if err == nil {
		byID := map[string]string{}
		for _, e := range in.Entries {
			byID[aws.ToString(e.Id)] = aws.ToString(e.ReceiptHandle)
		}
		l.mu.Lock()
		for _, s := range out.Successful {
			l.deleted[l.handles[byID[aws.ToString(s.Id)]]] = true
		}
		l.mu.Unlock()
	}
	return out, err
}

// DeleteMessage is sqs.Client's, as a batch of one.
func (l *limited) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	_, err := l.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: in.QueueUrl,
		Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: in.ReceiptHandle}}}, opts...)
	return &sqs.DeleteMessageOutput{}, err
}

// ChangeMessageVisibilityBatch is sqs.Client's.
func (l *limited) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = aws.ToString(e.Id)
		if e.VisibilityTimeout < 0 || e.VisibilityTimeout > maxVisibility {
			return nil, l.refuse("ChangeMessageVisibilityBatch on %s: VisibilityTimeout %d, SQS takes 0 to %d", queueName(aws.ToString(in.QueueUrl)), e.VisibilityTimeout, maxVisibility)
		}
	}
	if err := l.checkIDs("ChangeMessageVisibilityBatch", aws.ToString(in.QueueUrl), ids); err != nil {
		return nil, err
	}
	return l.next.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

// ChangeMessageVisibility is sqs.Client's, as a batch of one.
func (l *limited) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	_, err := l.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: in.QueueUrl,
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: in.ReceiptHandle, VisibilityTimeout: in.VisibilityTimeout}}}, opts...)
	return &sqs.ChangeMessageVisibilityOutput{}, err
}

// counting is the worker's valkey-go client on the stack: every request
// is checked against ElastiCache Serverless's 3,999 arguments, and the
// keys the row watches are noted when any command names them.
type counting struct {
	valkey.Client
	watch map[string]bool

	mu         sync.Mutex
	violations []string
	touched    map[string]bool
}

func (c *counting) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	c.mu.Lock()
	for _, cmd := range multi {
		args := cmd.Commands()
		if len(args) > maxCacheArgs {
			c.violations = append(c.violations, fmt.Sprintf("a %s of %d arguments: ElastiCache Serverless takes %d", args[0], len(args), maxCacheArgs))
		}
		for _, a := range args[1:] {
			if c.watch[a] {
				c.touched[a] = true
			}
		}
	}
	c.mu.Unlock()
	return c.Client.DoMulti(ctx, multi...)
}

func (c *counting) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	return c.DoMulti(ctx, cmd)[0]
}
