package parking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events"
)

// Kind marks a failure-queue message as a parked record.
const Kind = "invalidator.parked/v1"

// MaxBytes is the largest message SQS takes, which the failure queue must
// allow (MaximumMessageSize; template.yaml sets it).
const MaxBytes = 1 << 20

// ErrTooLarge is the error of a record that does not fit in a message
// even shortened: it cannot be parked, so it stays with its source.
var ErrTooLarge = errors.New("too large to park")

// Record is a parked record as the failure queue holds it.
type Record struct {
	Kind     string        `json:"kind"`
	Source   events.Source `json:"source"`
	Function string        `json:"function"`
	ID       string        `json:"recordId,omitempty"`
	// RequestID is the Lambda invoke that parked it, to find its log lines.
	RequestID string    `json:"requestId,omitempty"`
	Reason    string    `json:"reason"`
	ParkedAt  time.Time `json:"parkedAt"`
	// Record is the record as its event source delivered it: an SQS
	// message, an SNS record, a stream record, in the shape Lambda gives
	// them. A record that is not valid JSON (some are parked for that very
	// reason) is kept byte for byte in RecordBase64 instead.
	Record       json.RawMessage `json:"record,omitempty"`
	RecordBase64 []byte          `json:"recordBase64,omitempty"`
	// Truncated says the record was too large for a message: a stream
	// record kept without its images, to be read again from its stream.
	Truncated bool `json:"truncated,omitempty"`
}

// New returns the parked form of raw, a record from source that failed for
// the reason given.
func New(source events.Source, function, id, reason string, raw []byte, at time.Time) Record {
	r := Record{Kind: Kind, Source: source, Function: function, ID: sqsText(id), Reason: sqsText(reason), ParkedAt: at.UTC()}
	// JSON escapes none of the characters SQS refuses but U+FFFE and U+FFFF
	// and invalid UTF-8: valid JSON without them is kept as it is.
	if json.Valid(raw) && sqsSafe(string(raw)) {
		r.Record = raw
	} else {
		r.RecordBase64 = raw
	}
	return r
}

// sqsSafe says whether s holds only characters SQS takes in a message:
// tab, line feed, carriage return, and U+0020 to U+10FFFF but surrogates,
// U+FFFE and U+FFFF; control characters are fine once JSON escapes them.
func sqsSafe(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError && len(s[i:]) > 0 {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		if r == 0xFFFE || r == 0xFFFF {
			return false
		}
	}
	return true
}

// sqsText replaces what SQS refuses in a text of the worker's own, the
// reason or the ID, which may quote a broken record.
func sqsText(s string) string {
	if sqsSafe(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == 0xFFFE || r == 0xFFFF {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// Content returns the record as its source delivered it.
func (r *Record) Content() []byte {
	if r.Record != nil {
		return r.Record
	}
	return r.RecordBase64
}

// Encode returns the message body of r. A stream record too large for a
// message loses its images, which the stream still holds; any other
// record too large fails with ErrTooLarge.
func (r *Record) Encode() ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil || len(body) <= MaxBytes {
		return body, err
	}
	if r.Source == events.SourceDynamoDB && r.Record != nil {
		short := *r
		if short.Record, err = withoutImages(r.Record); err == nil {
			short.Truncated = true
			if body, err = json.Marshal(short); err == nil && len(body) <= MaxBytes {
				return body, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %d bytes, the most a message holds is %d", ErrTooLarge, len(body), MaxBytes)
}

// withoutImages returns a stream record without its item images.
func withoutImages(raw json.RawMessage) (json.RawMessage, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	var change map[string]json.RawMessage
	if err := json.Unmarshal(rec["dynamodb"], &change); err != nil {
		return nil, err
	}
	delete(change, "NewImage")
	delete(change, "OldImage")
	var err error
	if rec["dynamodb"], err = json.Marshal(change); err != nil {
		return nil, err
	}
	return json.Marshal(rec)
}

// Parse reads a failure-queue message body; ok is false when it is not a
// parked record (a stream's on-failure record, an SNS delivery failure...).
func Parse(body []byte) (r Record, ok bool, err error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(body, &probe) != nil || probe.Kind != Kind {
		return r, false, nil
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, true, fmt.Errorf("parked record: %w", err)
	}
	return r, true, nil
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
		body, err := records[i].Encode()
		if err != nil {
			errs[i] = err
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			_, errs[i] = q.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(body))})
		})
	}
	wg.Wait()
	return errs
}
