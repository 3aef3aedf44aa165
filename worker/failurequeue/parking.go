package failurequeue

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// MaxBytes is the largest message SQS takes, which the failure queue must
// allow (MaximumMessageSize; template.yaml sets it): a message's body and
// its attributes.
const MaxBytes = 1 << 20

// ErrTooLarge is the error of a record that does not fit in a message
// even shortened: it cannot be parked, so it stays with its source.
var ErrTooLarge = errors.New("too large to park")

// Content says what a parked message's body holds.
type Content string

// The contents of a parked message.
const (
	// Body is an SQS message's body or an SNS record's message, byte for
	// byte as it came: it fit the queue or topic it came through.
	Body Content = "body"
	// WholeRecord is the record as its event source delivered it, in the
	// shape Lambda gives it: a stream record, or a record that could not
	// be read (some are parked for that very reason).
	WholeRecord Content = "record"
	// RecordWithoutImages is a stream record too large for a message,
	// its item images emptied: replay reads it again from its stream.
	RecordWithoutImages Content = "record-without-images"
)

// Record is a parked record: what failed for good, where it came from, and
// why. Its message's body is Data, which Content says what it is; the rest
// travels as message attributes (Message).
type Record struct {
	Source   events.Source
	Function string
	ID       string
	// RequestID is the Lambda invoke that parked it, to find its log lines.
	RequestID string
	Reason    string
	ParkedAt  time.Time
	// SentAt is when the source took the message (SQS's SentTimestamp,
	// SNS's Timestamp): it dates the changes without a time of their own.
	// Zero when unknown.
	SentAt time.Time
	// From is the queue's or the topic's ARN, when the record names it.
	From    string
	Content Content
	Data    []byte
}

// New returns the parked form of raw, a record from source — an SQS
// message, an SNS record, a stream record, as Lambda gives them — that
// failed for the reason given: an SQS message's body or an SNS record's
// message as it came, with its coordinates; a stream record, or a record
// that cannot be read, whole.
func New(source events.Source, function, id, reason string, raw []byte, at time.Time) Record {
	r := Record{Source: source, Function: function, ID: id, Reason: reason, ParkedAt: at.UTC(), Content: WholeRecord, Data: raw}
	if !utf8.Valid(raw) {
		return r // its body could not be told byte for byte
	}
	var body message
	var err error
	switch source {
	case events.SourceSQS:
		err = jsonscan.Walk(raw, body.sqs(raw))
	case events.SourceSNS:
		err = jsonscan.Walk(raw, func(key []byte, i int) (int, error) {
			if string(key) == "Sns" {
				return jsonscan.WalkAt(raw, i, body.sns(raw))
			}
			_, end, err := jsonscan.ValueAt(raw, i)
			return end, err
		})
	default:
		return r
	}
	if err != nil || body.body == nil || len(*body.body) == 0 {
		return r
	}
	r.Content, r.Data, r.SentAt, r.From = Body, *body.body, body.sent, body.from
	if r.ID == "" {
		r.ID = body.id
	}
	return r
}

// message is what New reads of a record: the body and its coordinates.
type message struct {
	body     *[]byte
	id, from string
	sent     time.Time
}

// sqs reads an SQS message's members.
func (m *message) sqs(raw []byte) func(key []byte, i int) (int, error) {
	return func(key []byte, i int) (int, error) {
		switch string(key) {
		case "body":
			return m.text(raw, i, nil)
		case "messageId":
			return m.text(raw, i, &m.id)
		case "eventSourceARN":
			return m.text(raw, i, &m.from)
		case "attributes":
			if i < len(raw) && raw[i] == '{' {
				return jsonscan.WalkAt(raw, i, func(key []byte, i int) (int, error) {
					if string(key) != "SentTimestamp" {
						_, end, err := jsonscan.ValueAt(raw, i)
						return end, err
					}
					var ms string
					end, err := m.text(raw, i, &ms)
					if n, perr := strconv.ParseInt(ms, 10, 64); perr == nil {
						m.sent = time.UnixMilli(n).UTC()
					}
					return end, err
				})
			}
		}
		_, end, err := jsonscan.ValueAt(raw, i)
		return end, err
	}
}

// sns reads an SNS record's Sns members.
func (m *message) sns(raw []byte) func(key []byte, i int) (int, error) {
	return func(key []byte, i int) (int, error) {
		switch string(key) {
		case "Message":
			return m.text(raw, i, nil)
		case "MessageId":
			return m.text(raw, i, &m.id)
		case "TopicArn":
			return m.text(raw, i, &m.from)
		case "Timestamp":
			var at string
			end, err := m.text(raw, i, &at)
			if t, perr := time.Parse(time.RFC3339Nano, at); perr == nil {
				m.sent = t.UTC()
			}
			return end, err
		}
		_, end, err := jsonscan.ValueAt(raw, i)
		return end, err
	}
}

// text decodes the string at raw[i] into into, or into the body when into
// is nil; a value of another kind is skipped, and no body.
func (m *message) text(raw []byte, i int, into *string) (int, error) {
	if i >= len(raw) || raw[i] != '"' {
		_, end, err := jsonscan.ValueAt(raw, i)
		return end, err
	}
	s, end, err := jsonscan.AppendStringAt(nil, raw, i)
	if into != nil {
		*into = string(s)
	} else {
		m.body = &s
	}
	return end, err
}

// SQS is what a Queue needs of an SQS client; *sqs.Client has it.
type SQS interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queue parks records in an SQS queue.
type Queue struct {
	Client SQS
	URL    string
}

// Park sends each record to the queue, ten at a time, and returns for each
// the error that kept it out (nil when parked). A record that could not be
// parked must stay with its source, to be tried again.
func (q Queue) Park(ctx context.Context, records []Record) []error {
	errs := make([]error, len(records))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 10)
	for i := range records {
		in, err := records[i].Message(MaxBytes)
		if err != nil {
			errs[i] = err
			continue
		}
		in.QueueUrl = aws.String(q.URL)
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			_, errs[i] = q.Client.SendMessage(ctx, in)
		})
	}
	wg.Wait()
	return errs
}
