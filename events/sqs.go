package events

import (
	"cmp"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// DecodeSQSBody decodes the changes in an SQS message body: a raw change
// message (or an array of them), or one wrapped in an SNS or EventBridge
// envelope. With an error it may still return the changes of an array that
// did decode, so that their keys are invalidated while the message is
// retried. id names the message in errors; sentTimestamp, SQS's
// SentTimestamp attribute (milliseconds since the epoch), dates the changes
// that carry no time of their own; it may be "".
func DecodeSQSBody(id, body, sentTimestamp string) ([]Change, error) {
	return decodeSQSBody(id, unsafeBytes(body), sentAt(unsafeBytes(sentTimestamp)))
}

// DecodeSQSJSON decodes one raw record of an SQS event payload (see
// SplitRecords) as DecodeSQSBody does, and also returns its message ID, "" when
// the record is too broken to tell.
func DecodeSQSJSON(raw []byte) (string, []Change, error) {
	return decodeSQSRecord(raw, nil)
}

// decodeSQSRecord is DecodeSQSJSON, filling in d, when it is not nil, in
// the same pass.
func decodeSQSRecord(raw []byte, d *Delivery) (string, []Change, error) {
	buf := messageBuffers.Get().(*[]byte)
	defer messageBuffers.Put(buf)
	var id string
	var body, sent []byte
	bodyKind := jsonscan.Invalid
	var first error // a bad field does not stop the search for the ID
	err := jsonscan.Walk(raw, func(key []byte, i int) (int, error) {
		switch {
		case string(key) == "body" && startsWith(raw, i, '"'):
			// The body, most of the record, is decoded as it is validated.
			if d != nil {
				d.raw, d.bodyAt = raw, i
			}
			var end int
			var err error
			body, end, err = jsonscan.AppendStringAt((*buf)[:0], raw, i)
			*buf, bodyKind = body, jsonscan.String
			return end, err
		case string(key) == "attributes" && startsWith(raw, i, '{'):
			return jsonscan.WalkAt(raw, i, func(key []byte, i int) (int, error) {
				kind, end, err := jsonscan.ValueAt(raw, i)
				switch {
				case err != nil || kind != jsonscan.String:
				case string(key) == "SentTimestamp":
					sent = raw[i:end]
				case string(key) == "ApproximateReceiveCount" && d != nil:
					count, _ := stringField("ApproximateReceiveCount", raw[i:end], kind)
					d.Receipt.Receives, _ = strconv.Atoi(count)
				}
				return end, err
			})
		}
		kind, end, err := jsonscan.ValueAt(raw, i)
		if err != nil {
			return end, err
		}
		value := raw[i:end]
		switch string(key) {
		case "messageId":
			id, err = stringField("messageId", value, kind)
		case "body":
			bodyKind = kind
		case "receiptHandle":
			if d != nil {
				d.Receipt.Handle, _ = stringField("receiptHandle", value, kind)
			}
		case "eventSourceARN":
			if d != nil {
				d.From, _ = stringField("eventSourceARN", value, kind)
			}
		}
		first = cmp.Or(first, err)
		return end, nil
	})
	var digits [24]byte
	sentText, _ := jsonscan.AppendText(digits[:0], sent)
	at := sentAt(sentText)
	if d != nil {
		d.SentAt = at
	}
	switch err = cmp.Or(err, first); {
	case err != nil:
	case bodyKind == jsonscan.Invalid:
		err = invalid("the record has no body")
	case bodyKind != jsonscan.String:
		err = invalid("body must be a string, not " + bodyKind.String())
	}
	if err != nil {
		return id, nil, recordError(id, err)
	}
	changes, err := decodeSQSBody(id, body, at)
	return id, changes, err
}

// decodeSQSBody decodes body, which it does not retain; sent dates the
// changes that carry no time of their own.
func decodeSQSBody(id string, body []byte, sent time.Time) ([]Change, error) {
	changes, err := decodeBody(body, envelope{source: SourceSQS}, true, nil)
	if err != nil {
		return changes, recordError(id, err)
	}
	for i := range changes {
		if changes[i].OccurredAt.IsZero() {
			changes[i].OccurredAt = sent
		}
	}
	return changes, nil
}

// sentAt reads SQS's SentTimestamp, milliseconds since the epoch; zero when
// it is absent or malformed.
func sentAt(ms []byte) time.Time {
	n, err := strconv.ParseInt(unsafeString(ms), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}
