package failurequeue

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// The message attributes of a parked record. attrKind marks the message as
// one and says what its body holds: a Content, followed by encodedBase64 when
// the body is its base64 (it held characters SQS refuses).
const (
	attrKind      = "invalidator.parked"
	encodedBase64 = "+base64"
	attrSource    = "source"
	attrFunction  = "function"
	attrID        = "record-id"
	attrRequest   = "request-id"
	attrReason    = "reason"
	attrParkedAt  = "parked-at"
	attrSentAt    = "sent-at"
	attrFrom      = "from"
)

// The most bytes of a reason, and of each coordinate, a message carries: a
// decode error may quote a record at length, a panic has its stack (logged
// whole); a coordinate is an ID, a name, a time or an ARN.
const (
	maxReason     = 4096
	maxCoordinate = 256
)

// MaxAttributeBytes is the most a parked record's attributes take, as SQS
// counts them: a queue whose messages are parked must leave that much
// room below the failure queue's MaxBytes (template.yaml's queue does).
const MaxAttributeBytes = len(attrKind+"String") + len("record-without-images"+encodedBase64) + maxReason + len(attrReason+"String") +
	7*(maxCoordinate+len("String"+"request-id"))

// Message returns the message of r, its body and attributes, within
// maxBytes: a stream record too large loses its images, which the stream
// still holds; any other record too large fails with errTooLarge.
func (r *Record) Message(maxBytes int) (queues.Outgoing, error) {
	if len(r.Data) == 0 {
		return queues.Outgoing{}, errors.New("an empty record: nothing to park") // SQS takes no empty body
	}
	m := r.message(r.Content, r.Data)
	if m.Size() > maxBytes && r.Source.Stream() && r.Content == WholeRecord {
		if short, err := events.WithoutImages(r.Data); err == nil {
			m = r.message(RecordWithoutImages, short)
		}
	}
	if size := m.Size(); size > maxBytes {
		return queues.Outgoing{}, fmt.Errorf("%w: %d bytes with its attributes, the most a message holds is %d", errTooLarge, size, maxBytes)
	}
	return m, nil
}

// message is the message of data, which content says what it is.
func (r *Record) message(content Content, data []byte) queues.Outgoing {
	kind, body := string(content), string(data)
	if !sqsText(body) {
		kind, body = kind+encodedBase64, base64.StdEncoding.EncodeToString(data)
	}
	attrs := map[string]string{}
	for name, value := range map[string]string{
		attrKind: kind, attrSource: string(r.Source), attrFunction: r.Function, attrID: r.ID, attrRequest: r.RequestID,
		attrReason: r.Reason, attrParkedAt: timeText(r.ParkedAt), attrSentAt: timeText(r.SentAt), attrFrom: r.From,
	} {
		most := maxCoordinate
		if name == attrReason {
			most = maxReason
		}
		if value = sanitize(value, most); value != "" { // SQS refuses empty values
			attrs[name] = value
		}
	}
	return queues.Outgoing{Body: body, Attributes: attrs}
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// sqsText says whether s holds only characters SQS takes, in a body or an
// attribute: tab, line feed, carriage return, U+0020 to U+D7FF, U+E000 to
// U+FFFD, U+10000 to U+10FFFF, in valid UTF-8.
func sqsText(s string) bool {
	for i, r := range s {
		if !sqsRune(r) {
			return false
		}
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
	}
	return true
}

func sqsRune(r rune) bool {
	return r >= ' ' && r != 0xFFFE && r != 0xFFFF || r == '\t' || r == '\n' || r == '\r'
}

// sanitize fits a text of the worker's own, a reason or a coordinate,
// which may quote a broken record, to an attribute: what SQS refuses
// becomes U+FFFD, and it is cut at most bytes.
func sanitize(s string, most int) string {
	if !sqsText(s) {
		s = strings.Map(func(r rune) rune {
			if !sqsRune(r) {
				return utf8.RuneError
			}
			return r
		}, strings.ToValidUTF8(s, string(utf8.RuneError)))
	}
	if len(s) <= most {
		return s
	}
	cut := most - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Parse reads a failure-queue message, its body and its String message
// attributes (receive them: MessageAttributeNames All; queues.Strings);
// ok is false when it is not a parked record (a stream's on-failure
// record, an SNS delivery failure...). It reads the JSON envelope of
// earlier versions too (kind invalidator.parked/v1), which may still sit
// in a queue.
func Parse(body string, attrs map[string]string) (r Record, ok bool, err error) {
	kind, parked := attrs[attrKind]
	if !parked {
		return parseV1(body)
	}
	content, b64 := strings.CutSuffix(kind, encodedBase64)
	r = Record{Source: events.Source(attrs[attrSource]), Function: attrs[attrFunction], ID: attrs[attrID], RequestID: attrs[attrRequest],
		Reason: attrs[attrReason], From: attrs[attrFrom], Content: Content(content), Data: []byte(body)}
	for name, at := range map[string]*time.Time{attrParkedAt: &r.ParkedAt, attrSentAt: &r.SentAt} {
		if v := attrs[name]; v != "" {
			if *at, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return r, true, fmt.Errorf("parked record: %s: %w", name, err)
			}
		}
	}
	switch r.Content {
	case Body, WholeRecord, RecordWithoutImages:
	default:
		return r, true, fmt.Errorf("parked record: %s %q is not a content this version reads", attrKind, content)
	}
	if b64 {
		if r.Data, err = base64.StdEncoding.DecodeString(body); err != nil {
			return r, true, fmt.Errorf("parked record: its base64 body: %w", err)
		}
	}
	return r, true, nil
}

// v1 is a parked record as versions before message attributes sent it:
// one JSON object, the record inside.
type v1 struct {
	Kind         string          `json:"kind"`
	Source       events.Source   `json:"source"`
	Function     string          `json:"function"`
	ID           string          `json:"recordId"`
	RequestID    string          `json:"requestId"`
	Reason       string          `json:"reason"`
	ParkedAt     time.Time       `json:"parkedAt"`
	Record       json.RawMessage `json:"record"`
	RecordBase64 []byte          `json:"recordBase64"`
	Truncated    bool            `json:"truncated"`
}

// KindV1 marked a parked record of earlier versions.
const KindV1 = "invalidator.parked/v1"

func parseV1(body string) (r Record, ok bool, err error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal([]byte(body), &probe) != nil || probe.Kind != KindV1 {
		return r, false, nil
	}
	var old v1
	if err := json.Unmarshal([]byte(body), &old); err != nil {
		return r, true, fmt.Errorf("parked record: %w", err)
	}
	r = Record{Source: old.Source, Function: old.Function, ID: old.ID, RequestID: old.RequestID, Reason: old.Reason,
		ParkedAt: old.ParkedAt, Content: WholeRecord, Data: old.Record}
	if old.Record == nil {
		r.Data = old.RecordBase64
	}
	if old.Truncated {
		r.Content = RecordWithoutImages
	}
	return r, true, nil
}
