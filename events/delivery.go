package events

import (
	"time"
	"unicode/utf8"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// Delivery is what a record says of its delivery beside its changes, read
// in the same pass: its ID (message ID or sequence number), where and
// when it was sent, the message its producer sent — an SQS message's
// body, an SNS message; a stream record has none —, and for an SQS
// message what it takes to hand it back. It is all that parking and
// handing back need: nothing reads a record's JSON again.
type Delivery struct {
	ID      string
	From    string    // the queue's or the topic's ARN; "" when unknown
	SentAt  time.Time // zero when unknown
	Receipt Receipt   // an SQS message's
	// The message: as given (SNS, the SQS API), or as a JSON string at
	// bodyAt in raw (an SQS record of a Lambda event), read only when asked.
	message []byte
	raw     []byte
	bodyAt  int
}

// Receipt is what it takes to hand an SQS message back to its queue (the
// delivery's From): its receipt handle, and how many times it has been
// received (ApproximateReceiveCount, 0 when absent). What is missing or
// malformed is left empty.
type Receipt struct {
	Handle   string
	Receives int
}

// Message returns the message the record holds as its producer sent it,
// and whether it holds one that can be told byte for byte.
func (d Delivery) Message() ([]byte, bool) {
	if d.raw != nil {
		if !utf8.Valid(d.raw) {
			return nil, false
		}
		body, _, err := jsonscan.AppendStringAt(nil, d.raw, d.bodyAt)
		return body, err == nil && len(body) > 0
	}
	return d.message, len(d.message) > 0 && utf8.Valid(d.message)
}

// DecodeReceived decodes a message received through the SQS API, as
// DecodeSQSBody does, with its delivery: queueARN is its queue's,
// sentTimestamp its SentTimestamp attribute, receipt what hands it back.
func DecodeReceived(id, body, sentTimestamp, queueARN string, receipt Receipt) (Delivery, []Change, error) {
	d := Delivery{ID: id, From: queueARN, SentAt: sentAt(unsafeBytes(sentTimestamp)), Receipt: receipt, message: []byte(body)}
	changes, err := decodeSQSBody(id, unsafeBytes(body), d.SentAt)
	return d, changes, err
}
