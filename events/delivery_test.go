package events

import (
	"testing"
	"time"
)

// TestADeliveryIsReadWithItsChanges: the ID, the message as sent, where
// and when it was sent and the receipt come from the same pass as the
// changes, for every source; a record without a message that can be told
// byte for byte has none.
func TestADeliveryIsReadWithItsChanges(t *testing.T) {
	body := `{"entity":"user","id":"<1>&\u2028"}`
	for _, c := range []struct {
		name   string
		decode func() (Delivery, []Change, error)
		want   Delivery
		msg    string
	}{
		{"sqs", func() (Delivery, []Change, error) {
			return Decode(SourceSQS, []byte(`{"messageId":"m1","receiptHandle":"h","body":"{\"entity\":\"user\",\"id\":\"<1>&\\u2028\"}",`+
				`"attributes":{"ApproximateReceiveCount":"3","SentTimestamp":"1796000000123"},"eventSourceARN":"arn:aws:sqs:us-east-1:1:q"}`), Attributes{})
		}, Delivery{ID: "m1", From: "arn:aws:sqs:us-east-1:1:q", SentAt: time.UnixMilli(1796000000123), Receipt: Receipt{Handle: "h", Receives: 3}}, body},
		{"sns", func() (Delivery, []Change, error) {
			return Decode(SourceSNS, []byte(`{"Sns":{"MessageId":"s1","TopicArn":"arn:aws:sns:us-east-1:1:t","Timestamp":"2026-12-06T00:00:00Z",`+
				`"Message":"{\"entity\":\"user\",\"id\":\"<1>&\\u2028\"}"}}`), Attributes{})
		}, Delivery{ID: "s1", From: "arn:aws:sns:us-east-1:1:t", SentAt: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}, body},
		{"received", func() (Delivery, []Change, error) {
			return DecodeReceived("r1", body, "1796000000123", "arn:aws:sqs:us-east-1:1:q", Receipt{Receives: 2})
		}, Delivery{ID: "r1", From: "arn:aws:sqs:us-east-1:1:q", SentAt: time.UnixMilli(1796000000123), Receipt: Receipt{Receives: 2}}, body},
		{"sqs, not UTF-8", func() (Delivery, []Change, error) {
			return Decode(SourceSQS, []byte("{\"messageId\":\"m2\",\"body\":\"\xff\"}"), Attributes{})
		}, Delivery{ID: "m2"}, ""},
	} {
		d, changes, err := c.decode()
		if c.msg != "" && (err != nil || len(changes) != 1 || changes[0].ID != "<1>&\u2028") {
			t.Errorf("%s: changes %+v, %v", c.name, changes, err)
		}
		msg, ok := d.Message()
		if d.ID != c.want.ID || d.From != c.want.From || !d.SentAt.Equal(c.want.SentAt) || d.Receipt != c.want.Receipt || string(msg) != c.msg || ok != (c.msg != "") {
			t.Errorf("%s: delivery %+v, message %q (%v); want %+v, %q", c.name, d, msg, ok, c.want, c.msg)
		}
	}
}
