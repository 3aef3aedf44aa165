package failurequeue

import (
	"context"
	"errors"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// MaxBytes is the largest message SQS takes, which the failure queue must
// allow (MaximumMessageSize; template.yaml sets it): a message's body and
// its attributes.
const MaxBytes = 1 << 20

// errTooLarge is the error of a record that does not fit in a message
// even shortened: it cannot be parked, so it stays with its source.
var errTooLarge = errors.New("too large to park")

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

// New returns the parked form of a record from source — an SQS message,
// an SNS record, a stream record — that failed for the reason given: the
// message it carries as it came (d.Message), with its coordinates; a
// stream record, or a record without a message that can be told, whole:
// raw, as Lambda gave it.
func New(source events.Source, function string, d events.Delivery, reason string, raw []byte, at time.Time) Record {
	r := Record{Source: source, Function: function, ID: d.ID, Reason: reason, ParkedAt: at.UTC(), Content: WholeRecord, Data: raw}
	if source.Stream() || raw != nil && !utf8.Valid(raw) {
		return r // no message, or one that cannot be told byte for byte
	}
	if msg, ok := d.Message(); ok {
		r.Content, r.Data, r.SentAt, r.From = Body, msg, d.SentAt, d.From
	}
	return r
}

// Queue parks records in an SQS queue.
type Queue struct {
	Client queues.SQS
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
		m, err := records[i].Message(MaxBytes)
		if err != nil {
			errs[i] = err
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = queues.Send(ctx, q.Client, q.URL, m)
		})
	}
	wg.Wait()
	return errs
}
