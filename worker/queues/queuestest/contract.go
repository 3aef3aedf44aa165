package queuestest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/worker/queues"
)

// Contract runs the contract of an SQS client, each behaviour in a parallel
// subtest on a new empty standard queue that newQueue returns the URL of.
// Timings are in whole seconds, as SQS (and moto) count them.
func Contract(t *testing.T, newQueue func(t *testing.T) (queues.SQS, string)) {
	for _, b := range []struct {
		name string
		test func(*testing.T, queue)
	}{
		{"sent, received with the attributes asked, deleted", sendReceiveDelete},
		{"no attributes unless asked", unasked},
		{"message attributes as sent, those asked", asSent},
		{"back after its visibility timeout, counted", comesBack},
		{"visibility changed in a batch, partly", changeVisibility},
		{"deleted in a batch, partly; older handles still work", deleteBatch},
		{"hidden until its DelaySeconds", delayed},
		{"sent in a batch, each entry with its delay", sendBatch},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			client, url := newQueue(t)
			b.test(t, queue{client, url, map[string]string{}})
		})
	}
}

// receiveFor bounds how long a message due now may take to be received: a
// stall, not a timing, on a loaded machine (moto answers slowly under load).
const receiveFor = 20 * time.Second

type queue struct {
	client queues.SQS
	url    string
	bodies map[string]string // of what send sent, by message ID
}

func (q queue) send(t *testing.T, body string, delay int32) string {
	t.Helper()
	out, err := q.client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &body, DelaySeconds: delay})
	if err != nil {
		t.Fatal(err)
	}
	q.bodies[aws.ToString(out.MessageId)] = body
	return aws.ToString(out.MessageId)
}

// readAttributes are those the code reads.
var readAttributes = []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateReceiveCount}

// receive waits up to wait seconds for messages, hidden for visibility
// seconds once received.
func (q queue) receive(t *testing.T, wait, visibility int32, attrs ...types.MessageSystemAttributeName) []types.Message {
	t.Helper()
	out, err := q.client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: &q.url, MaxNumberOfMessages: 10,
		WaitTimeSeconds: wait, VisibilityTimeout: visibility, MessageSystemAttributeNames: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

// resent tells a copy of a message sent twice: the SDK sends a request
// again when its connection broke, as it does against SQS, and a send may
// have been taken before — at least once, with a message ID of its own.
func (q queue) resent(m types.Message) bool {
	for id, body := range q.bodies {
		if body == aws.ToString(m.Body) && id != aws.ToString(m.MessageId) {
			return true
		}
	}
	return false
}

// receiveAll receives until it holds the messages of ids, which a receive
// may hand out a few at a time, and fails on any other.
func (q queue) receiveAll(t *testing.T, visibility int32, ids ...string) []types.Message {
	t.Helper()
	var got []types.Message
	for deadline := time.Now().Add(receiveFor); len(got) < len(ids); {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of messages %v", len(got), ids)
		}
		for _, m := range q.receive(t, 1, visibility, readAttributes...) {
			if !slices.Contains(ids, aws.ToString(m.MessageId)) && q.resent(m) {
				continue
			}
			if !slices.Contains(ids, aws.ToString(m.MessageId)) {
				t.Fatalf("received message %s, want only %v", aws.ToString(m.MessageId), ids)
			}
			got = append(got, m)
		}
	}
	slices.SortFunc(got, func(a, b types.Message) int {
		return slices.Index(ids, aws.ToString(a.MessageId)) - slices.Index(ids, aws.ToString(b.MessageId))
	})
	return got
}

// none fails t if a message is visible.
func (q queue) none(t *testing.T, why string) {
	t.Helper()
	if msgs := q.receive(t, 0, 30); len(msgs) > 0 {
		t.Fatalf("%s: received %s", why, aws.ToString(msgs[0].MessageId))
	}
}

func receives(t *testing.T, m types.Message, want int) {
	t.Helper()
	if n := m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]; n != strconv.Itoa(want) {
		t.Fatalf("message %s: ApproximateReceiveCount %q, want %d", aws.ToString(m.MessageId), n, want)
	}
}

// batchResult fails t unless the entries with the IDs ok succeeded and
// the others failed for an invalid receipt handle.
func batchResult(t *testing.T, call string, successful []string, failed []types.BatchResultErrorEntry, ok ...string) {
	t.Helper()
	slices.Sort(successful)
	var invalid []string
	for _, f := range failed {
		if aws.ToString(f.Code) != "ReceiptHandleIsInvalid" {
			t.Fatalf("%s: entry %s failed with %s, want ReceiptHandleIsInvalid", call, aws.ToString(f.Id), aws.ToString(f.Code))
		}
		invalid = append(invalid, aws.ToString(f.Id))
	}
	if !slices.Equal(successful, ok) || len(invalid) != 1 || invalid[0] != "bogus" {
		t.Fatalf("%s: successful %v, failed %v; want %v and bogus", call, successful, invalid, ok)
	}
}

func (q queue) delete(t *testing.T, handles map[string]*string, ok ...string) {
	t.Helper()
	var entries []types.DeleteMessageBatchRequestEntry
	for id, h := range handles {
		entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(id), ReceiptHandle: h})
	}
	out, err := q.client.DeleteMessageBatch(t.Context(), &sqs.DeleteMessageBatchInput{QueueUrl: &q.url, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	var successful []string
	for _, s := range out.Successful {
		successful = append(successful, aws.ToString(s.Id))
	}
	batchResult(t, "DeleteMessageBatch", successful, out.Failed, ok...)
}

func (q queue) hide(t *testing.T, entries []types.ChangeMessageVisibilityBatchRequestEntry, ok ...string) {
	t.Helper()
	out, err := q.client.ChangeMessageVisibilityBatch(t.Context(), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &q.url, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	var successful []string
	for _, s := range out.Successful {
		successful = append(successful, aws.ToString(s.Id))
	}
	batchResult(t, "ChangeMessageVisibilityBatch", successful, out.Failed, ok...)
}

// bogus is a receipt handle never given.
var bogus = aws.String("AQEBbogus")

func sendReceiveDelete(t *testing.T, q queue) {
	before := time.Now()
	id := q.send(t, "one", 0)
	after := time.Now()
	m := q.receiveAll(t, 1, id)[0]
	if aws.ToString(m.Body) != "one" {
		t.Fatalf("body %q, want one", aws.ToString(m.Body))
	}
	receives(t, m, 1)
	sent, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil || sent < before.Add(-time.Second).UnixMilli() || sent > after.Add(time.Second).UnixMilli() {
		t.Fatalf("SentTimestamp %q (%v), want within a second of %v", m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], err, before)
	}
	q.delete(t, map[string]*string{"m": m.ReceiptHandle, "bogus": bogus}, "m")
	q.delete(t, map[string]*string{"again": m.ReceiptHandle, "bogus": bogus}, "again") // a deleted message deletes again
	time.Sleep(1500 * time.Millisecond)                                                // past its visibility timeout
	q.none(t, "a deleted message")
}

func unasked(t *testing.T, q queue) {
	q.sendWith(t, "one", map[string]string{"reason": "why"})
	for deadline := time.Now().Add(receiveFor); ; {
		if msgs := q.receive(t, 1, 30); len(msgs) > 0 {
			if len(msgs[0].Attributes)+len(msgs[0].MessageAttributes) > 0 {
				t.Fatalf("attributes %v, message attributes %v, asked for none", msgs[0].Attributes, msgs[0].MessageAttributes)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no message")
		}
	}
}

// sendWith sends body with string message attributes.
func (q queue) sendWith(t *testing.T, body string, attrs map[string]string) string {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &body, MessageAttributes: map[string]types.MessageAttributeValue{}}
	for name, v := range attrs {
		in.MessageAttributes[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	out, err := q.client.SendMessage(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

func asSent(t *testing.T, q queue) {
	sent := map[string]string{"invalidator.parked": "body", "invalidator.reason": "a <reason> & \"more\"\n", "source": "sqs"}
	ids := []string{q.sendWith(t, "one", sent), q.sendWith(t, "two", sent)}
	for _, c := range []struct {
		ask  []string
		want []string
	}{{[]string{"All"}, []string{"invalidator.parked", "invalidator.reason", "source"}}, {[]string{"invalidator.*"}, []string{"invalidator.parked", "invalidator.reason"}}} {
		var msgs []types.Message
		for deadline := time.Now().Add(receiveFor); len(msgs) == 0; {
			out, err := q.client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: &q.url, WaitTimeSeconds: 1, MaxNumberOfMessages: 1, MessageAttributeNames: c.ask})
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("no message (%v)", err)
			}
			msgs = out.Messages
		}
		if !slices.Contains(ids, aws.ToString(msgs[0].MessageId)) {
			t.Fatalf("received %s, want one of %v", aws.ToString(msgs[0].MessageId), ids)
		}
		var got []string
		for name, v := range msgs[0].MessageAttributes {
			got = append(got, name)
			if aws.ToString(v.StringValue) != sent[name] || aws.ToString(v.DataType) != "String" {
				t.Fatalf("attribute %s = %s %q, want String %q", name, aws.ToString(v.DataType), aws.ToString(v.StringValue), sent[name])
			}
		}
		if slices.Sort(got); !slices.Equal(got, c.want) {
			t.Fatalf("asked for %v: attributes %v, want %v", c.ask, got, c.want)
		}
	}
}

func comesBack(t *testing.T, q queue) {
	id := q.send(t, "one", 0)
	first := q.receiveAll(t, 1, id)[0]
	received := time.Now()
	q.none(t, "a message in flight")
	again := q.receiveAll(t, 30, id)[0]
	if waited := time.Since(received); waited < 500*time.Millisecond {
		t.Fatalf("back after %v, before its visibility timeout of 1 s", waited)
	}
	receives(t, again, 2)
	if aws.ToString(again.ReceiptHandle) == aws.ToString(first.ReceiptHandle) {
		t.Fatal("the same receipt handle twice")
	}
}

func changeVisibility(t *testing.T, q queue) {
	ids := []string{q.send(t, "now", 0), q.send(t, "later", 0)}
	msgs := q.receiveAll(t, 30, ids...)
	changed := time.Now()
	q.hide(t, []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("now"), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0},
		{Id: aws.String("later"), ReceiptHandle: msgs[1].ReceiptHandle, VisibilityTimeout: 2},
		{Id: aws.String("bogus"), ReceiptHandle: bogus, VisibilityTimeout: 2},
	}, "later", "now")
	receives(t, q.receiveAll(t, 30, ids[0])[0], 2)
	if waited := time.Since(changed); waited > time.Second {
		t.Fatalf("a message made visible at once came back after %v", waited)
	}
	q.none(t, "a message hidden for 2 s")
	receives(t, q.receiveAll(t, 30, ids[1])[0], 2)
	if waited := time.Since(changed); waited < 1500*time.Millisecond {
		t.Fatalf("a message hidden for 2 s came back after %v", waited)
	}
}

func deleteBatch(t *testing.T, q queue) {
	ids := []string{q.send(t, "done", 0), q.send(t, "failed", 0)}
	msgs := q.receiveAll(t, 1, ids...)
	q.delete(t, map[string]*string{"done": msgs[0].ReceiptHandle, "bogus": bogus}, "done")
	again := q.receiveAll(t, 30, ids[1])[0] // and never the deleted one
	receives(t, again, 2)
	// The poller's visibility extensions and deletes may hold the handle
	// of an earlier receive: SQS takes it.
	old := msgs[1].ReceiptHandle
	q.hide(t, []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("old"), ReceiptHandle: old, VisibilityTimeout: 30},
		{Id: aws.String("bogus"), ReceiptHandle: bogus}}, "old")
	q.delete(t, map[string]*string{"old": old, "bogus": bogus}, "old")
}

func delayed(t *testing.T, q queue) {
	start := time.Now()
	id := q.send(t, "one", 1)
	q.none(t, "a delayed message")
	q.receiveAll(t, 30, id)
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("a message delayed 1 s came after %v", waited)
	}
}

// sendBatch: a batch's entries are messages of their own, each hidden for
// its own DelaySeconds, the batch answering each by its entry ID.
func sendBatch(t *testing.T, q queue) {
	out, err := q.client.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: &q.url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("now"), MessageBody: aws.String("now")}, {Id: aws.String("later"), MessageBody: aws.String("later"), DelaySeconds: 2}}})
	if err != nil || len(out.Successful) != 2 || len(out.Failed) != 0 {
		t.Fatalf("send: %+v, %v", out, err)
	}
	var got []string
	for deadline := time.Now().Add(receiveFor); len(got) < 2 && time.Now().Before(deadline); {
		for _, m := range q.receive(t, 1, 30) {
			got = append(got, aws.ToString(m.Body))
			if len(got) == 1 && aws.ToString(m.Body) != "now" {
				t.Fatalf("received %q first, want the entry without a delay", aws.ToString(m.Body))
			}
		}
	}
	if !slices.Equal(got, []string{"now", "later"}) {
		t.Fatalf("received %q, want now, then later", got)
	}
}
