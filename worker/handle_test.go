package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

const (
	testQueueARN = "arn:aws:sqs:us-east-1:123456789012:cache-invalidation"
	testQueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation"
	failureURL   = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-failures"
)

// down fails, for now, every key of entity "down".
func down(key string, _ int) error {
	if strings.HasPrefix(key, "cache:down:") {
		return cachetest.ErrRefused
	}
	return nil
}

// testWorker invalidates through a fake cache, parks in and hands back to
// a fake SQS.
func testWorker(fail func(string, int) error, sqsFake *queuestest.SQS) *Worker {
	inv := invalidate.New(&cachetest.Cache{Fail: fail}, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	return New(inv, Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, DeadlineMargin: 100 * time.Millisecond,
		Park: failurequeue.Queue{Client: sqsFake, URL: failureURL}, Queues: sqsFake})
}

// received sends bodies to the fake queue, receives them, and returns the
// Lambda payload of the batch.
func received(t *testing.T, sqsFake *queuestest.SQS, bodies ...string) ([]byte, []lambdaevent.SQSMessage) {
	t.Helper()
	for _, b := range bodies {
		sqsFake.Send(testQueueURL, b)
	}
	out, err := sqsFake.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(testQueueURL), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil || len(out.Messages) != len(bodies) {
		t.Fatalf("receive: %d messages, %v", len(out.Messages), err)
	}
	var ev lambdaevent.SQSEvent
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, lambdaevent.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body,
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: testQueueARN, AWSRegion: "us-east-1"})
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return payload, ev.Records
}

// parked returns the records in the fake failure queue.
func parked(t *testing.T, sqsFake *queuestest.SQS) []failurequeue.Record {
	t.Helper()
	var out []failurequeue.Record
	for _, m := range sqsFake.Messages(failureURL) {
		r, ok, err := failurequeue.Parse(m.Body, queues.Strings(m.Attributes))
		if !ok || err != nil {
			t.Fatalf("not a parked record (%v): %s", err, m.Body)
		}
		out = append(out, r)
	}
	return out
}

func deadline(t *testing.T) context.Context { return deadlineIn(t, 500*time.Millisecond) }

// deadlineIn is an invoke's context with d left: a payload of a megabyte
// takes seconds under the race detector.
func deadlineIn(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestSQSParksWhatFailsForGoodAndHandsBackTheRest(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	payload, msgs := received(t, sqsFake, `{"entity":"user","id":"1"}`, `{"entity":"user","id":`, `{"entity":"down","id":"2"}`)
	start := time.Now()
	resp, err := answerOf(testWorker(down, sqsFake).Lambda(deadline(t), events.SourceSQS, payload))
	if err != nil || len(resp.Retry) != 1 || resp.Retry[0].Record != msgs[2].MessageId {
		t.Fatalf("response %+v, %v: want only the message whose key failed for now", resp, err)
	}
	p := parked(t, sqsFake)
	if len(p) != 1 || p[0].ID != msgs[1].MessageId || p[0].Source != events.SourceSQS || !strings.Contains(p[0].Reason, "malformed JSON") {
		t.Fatalf("parked %+v: want the poison message, with its reason", p)
	}
	if p[0].Content != failurequeue.Body || string(p[0].Data) != msgs[1].Body || p[0].From != testQueueARN || p[0].SentAt.IsZero() {
		t.Fatalf("parked %+v: want the message's body as it came, and where and when it was sent", p[0])
	}
	// The message to retry comes back after about a second, not after the
	// queue's visibility timeout.
	for _, m := range sqsFake.Messages(testQueueURL) {
		if m.ID == msgs[2].MessageId {
			if back := m.VisibleAt.Sub(start); back < 500*time.Millisecond || back > 2*time.Second {
				t.Fatalf("the failed message comes back after %v, want about 1 s", back)
			}
		}
	}
}

func TestARecordThatCannotBeParkedIsRetried(t *testing.T) {
	sqsFake := &queuestest.SQS{Fail: func(op string) error {
		if op == "SendMessage" {
			return errors.New("access denied")
		}
		return nil
	}}
	payload, msgs := received(t, sqsFake, `{"entity":"user","id":"1"}`, `not json`)
	resp, err := answerOf(testWorker(nil, sqsFake).Lambda(deadline(t), events.SourceSQS, payload))
	if err != nil || len(resp.Retry) != 1 || resp.Retry[0].Record != msgs[1].MessageId {
		t.Fatalf("response %+v, %v: want the poison message handed back, not dropped", resp, err)
	}
}

// TestAParkedMessageKeepsItsBody: a message that fails for good is
// parked as it came, byte for byte — it fit the queue it came through —,
// however many characters JSON escapes it holds, within the failure
// queue's 1 MiB.
func TestAParkedMessageKeepsItsBody(t *testing.T) {
	// Not JSON, so it fails for good: a quote, <, >, & and a line feed,
	// which JSON writes as 2 to 6 bytes each.
	poison := `{"entity":"user","id":` + strings.Repeat("\"<&>\n", 180_000)
	for _, c := range []struct {
		name string
		body string
		run  func(w *Worker, sqsFake *queuestest.SQS) answer
	}{
		{"SQS", poison, func(w *Worker, sqsFake *queuestest.SQS) answer {
			payload, _ := received(t, sqsFake, poison)
			out, _ := answerOf(w.Lambda(deadlineIn(t, time.Minute), events.SourceSQS, payload))
			return out
		}},
		{"SNS", poison[:250_000], func(w *Worker, _ *queuestest.SQS) answer {
			payload, _ := json.Marshal(lambdaevent.SNSEvent{Records: []events.SNSRecord{{
				SNS: events.SNSMessage{MessageID: "sns-1", Message: poison[:250_000], Timestamp: time.Now()}}}})
			out, _ := answerOf(w.Lambda(deadlineIn(t, time.Minute), events.SourceSNS, payload))
			return out
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sqsFake := &queuestest.SQS{}
			if out := c.run(testWorker(nil, sqsFake), sqsFake); len(out.Retry) != 0 {
				t.Fatalf("retry %+v: want the message parked", out.Retry)
			}
			msgs := sqsFake.Messages(failureURL)
			if len(msgs) != 1 || msgs[0].Body != c.body {
				t.Fatalf("%d parked, want the message's body of %d bytes byte for byte", len(msgs), len(c.body))
			}
		})
	}
}

func streamPayload(t *testing.T, records ...lambdaevent.DynamoDBEventRecord) []byte {
	t.Helper()
	payload, err := json.Marshal(lambdaevent.DynamoDBEvent{Records: records})
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

func streamRecord(seq, id string, table string) lambdaevent.DynamoDBEventRecord {
	return lambdaevent.DynamoDBEventRecord{
		EventName: "MODIFY", EventSource: "aws:dynamodb",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/" + table + "/stream/2026-11-29T12:00:00.000",
		Change: lambdaevent.DynamoDBStreamRecord{SequenceNumber: seq,
			Keys: events.Image{"id": {Type: events.TypeString, S: id}}},
	}
}

func TestStreamParksOnlyBeforeTheFirstRecordToRetry(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	bad := streamRecord("200", "x", "t")
	bad.EventName = "UPSERT"
	later := streamRecord("400", "y", "t")
	later.EventName = "UPSERT"
	payload := streamPayload(t, streamRecord("100", "1", "user"), bad, streamRecord("300", "2", "down"), later)
	resp, err := answerOf(testWorker(down, sqsFake).Lambda(deadline(t), events.SourceDynamoDB, payload))
	var failed []string
	for _, f := range resp.Retry {
		failed = append(failed, f.Record)
	}
	if err != nil || !slices.Equal(failed, []string{"300", "400"}) {
		t.Fatalf("reported %q (%v): want 300, to retry, and 400 after it", failed, err)
	}
	// 400 comes again with 300: parking it now would park it twice.
	if p := parked(t, sqsFake); len(p) != 1 || p[0].ID != "200" || p[0].Source != events.SourceDynamoDB {
		t.Fatalf("parked %+v: want 200 alone", p)
	}
}

func TestSNSParksWhatFailsForGoodAndFailsWhatFailsForNow(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	w := testWorker(down, sqsFake)
	invoke := func(message string) answer {
		payload, _ := json.Marshal(lambdaevent.SNSEvent{Records: []events.SNSRecord{{
			SNS: events.SNSMessage{MessageID: "sns-1", Message: message, Timestamp: time.Now()}}}})
		out, err := answerOf(w.Lambda(deadline(t), events.SourceSNS, payload))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := invoke(`{"entity":"user","op":"upsert"}`); len(out.Retry) != 0 {
		t.Fatalf("a message that fails for good: retry %v, want it parked and the invoke done", out.ids())
	}
	if p := parked(t, sqsFake); len(p) != 1 || p[0].ID != "sns-1" || p[0].Source != events.SourceSNS {
		t.Fatalf("parked %+v", p)
	}
	if out := invoke(`{"entity":"down","id":"1"}`); len(out.Retry) != 1 || out.Retry[0].Record != "sns-1" || out.Retry[0].Err == nil {
		t.Fatalf("a message that fails for now: retry %+v, want it with its error, so SNS retries", out.Retry)
	}
}

func TestAPanicParksTheBatchWithItsStack(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	raws := [][]byte{[]byte(`{"n":1}`)}
	rep := testWorker(nil, sqsFake).Handle(deadline(t), events.SourceSQS,
		invalidate.Inputs(raws, func(*[]byte) invalidate.Record { panic("decoder bug") }),
		func(i int) (events.Delivery, []byte) { return events.Delivery{}, raws[i] })
	p := parked(t, sqsFake)
	if rep.Records[0].Fate != Parked || len(p) != 1 || !strings.Contains(p[0].Reason, "decoder bug") || !strings.Contains(p[0].Reason, "goroutine") {
		t.Fatalf("outcome %+v, parked %+v: want the record parked with the panic and its stack", rep.Records[0], p)
	}
}

// TestStartsAndAnswersWithTheCacheUnreachable: nothing listens where the
// cache should be; the worker starts all the same, answers before the
// deadline that its records failed for now, and still parks what fails
// for good.
func TestStartsAndAnswersWithTheCacheUnreachable(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	cfg := Config{Cache: elasticache.Config{Endpoint: "127.0.0.1:1"}, Rules: invalidate.DefaultRules(), FailureQueueURL: failureURL}
	w, err := Start("sqs-invalidate", cfg, sqsFake)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.opts.Logger, w.opts.Metrics = slog.New(slog.DiscardHandler), io.Discard
	payload, msgs := received(t, sqsFake, `{"entity":"user","id":"1"}`, `{"entity":`)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := answerOf(w.Lambda(ctx, events.SourceSQS, payload))
	if err != nil || len(resp.Retry) != 1 || resp.Retry[0].Record != msgs[0].MessageId {
		t.Fatalf("response %+v, %v: want the good message to retry", resp, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("answered after %v, past the deadline", took)
	}
	if p := parked(t, sqsFake); len(p) != 1 || p[0].ID != msgs[1].MessageId {
		t.Fatalf("parked %+v: want the broken message", p)
	}
}

// refusing is a fake SQS that refuses to send messages holding a text.
// refusing refuses to send the parked record of one ID.
type refusing struct {
	*queuestest.SQS
	id string
}

func (r refusing) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if aws.ToString(in.MessageAttributes["record-id"].StringValue) == r.id {
		return nil, errors.New("throttled")
	}
	return r.SQS.SendMessage(ctx, in, opts...)
}

// TestStreamParkingStopsWhereARecordCannotBeParked: the record that cannot
// be parked is retried, and the shard with it from there; the records
// after its chunk of ten are not parked now, or they would be twice.
func TestStreamParkingStopsWhereARecordCannotBeParked(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	w := testWorker(nil, sqsFake)
	w.opts.Park = failurequeue.Queue{Client: refusing{sqsFake, "201"}, URL: failureURL}
	var records []lambdaevent.DynamoDBEventRecord
	for i := range 12 {
		r := streamRecord(strconv.Itoa(201+i), "x", "t")
		r.EventName = "UPSERT"
		records = append(records, r)
	}
	resp, err := answerOf(w.Lambda(deadline(t), events.SourceDynamoDB, streamPayload(t, records...)))
	var failed []string
	for _, f := range resp.Retry {
		failed = append(failed, f.Record)
	}
	if err != nil || !slices.Equal(failed, []string{"201", "211", "212"}) {
		t.Fatalf("reported %q (%v): want 201, which could not be parked, and the records past its chunk", failed, err)
	}
	if p := parked(t, sqsFake); len(p) != 9 {
		t.Fatalf("%d parked, want the nine beside 201 in its chunk", len(p))
	}
}

func TestEachFailedIdentifierOnce(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	payload, _ := json.Marshal(lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{
		{MessageId: "twice", Body: `{"entity":"down","id":"1"}`},
		{MessageId: "twice", Body: `{"entity":"down","id":"2"}`},
	}})
	resp, err := answerOf(testWorker(down, sqsFake).Lambda(deadline(t), events.SourceSQS, payload))
	if err != nil || len(resp.Retry) != 1 || resp.Retry[0].Record != "twice" {
		t.Fatalf("response %+v, %v: want the shared identifier once", resp, err)
	}
}

// TestAPayloadThatIsNoEventFailsTheInvoke: a misrouted trigger or a manual
// invoke is not acknowledged as an empty batch.
func TestAPayloadThatIsNoEventFailsTheInvoke(t *testing.T) {
	w := testWorker(nil, &queuestest.SQS{})
	for _, payload := range []string{`{}`, `{"detail-type":"Object Created","detail":{}}`, `[]`} {
		if _, err := w.Lambda(deadline(t), events.SourceSQS, []byte(payload)); err == nil {
			t.Errorf("SQS %s: no error", payload)
		}
		if _, err := w.Lambda(deadline(t), events.SourceDynamoDB, []byte(payload)); err == nil {
			t.Errorf("DynamoDB %s: no error", payload)
		}
		if _, err := w.Lambda(deadline(t), events.SourceSNS, []byte(payload)); err == nil {
			t.Errorf("SNS %s: no error", payload)
		}
	}
}

// TestAKeyThatKeepsFailingHoldsBackOnlyItsRecord: with a deadline far off,
// an SQS batch gives its failing key RetryFor, not the whole deadline, and
// hands its record back; the record beside it is done.
func TestAKeyThatKeepsFailingHoldsBackOnlyItsRecord(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	w := testWorker(down, sqsFake)
	w.opts.RetryFor = 50 * time.Millisecond
	payload, msgs := received(t, sqsFake, `{"entity":"user","id":"1"}`, `{"entity":"down","id":"2"}`)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := answerOf(w.Lambda(ctx, events.SourceSQS, payload))
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the batch took %v: its failing key was retried until the deadline", took)
	}
	if err != nil || len(resp.Retry) != 1 || resp.Retry[0].Record != msgs[1].MessageId {
		t.Fatalf("response %+v, %v: want only the record of the failing key back", resp, err)
	}
}

// TestAStreamBatchWaitsForTheCacheWithinItsInvoke: the keys of a stream
// batch (and an SNS one) are retried until its deadline — the shard waits
// for its first failed record anyway, and Lambda pauses before it tries it
// again —; an SQS batch's, for RetryFor.
func TestAStreamBatchWaitsForTheCacheWithinItsInvoke(t *testing.T) {
	for source, fate := range map[events.Source]Fate{events.SourceSQS: Retry,
		events.SourceDynamoDB: Done, events.SourceKinesis: Done, events.SourceKafka: Done, events.SourceSNS: Done} {
		t.Run(string(source), func(t *testing.T) {
			back := time.Now().Add(300 * time.Millisecond)
			w := testWorker(func(string, int) error {
				if time.Now().Before(back) {
					return cachetest.ErrRefused
				}
				return nil
			}, &queuestest.SQS{})
			w.opts.RetryFor = 50 * time.Millisecond
			out := w.Handle(deadlineIn(t, 10*time.Second), source, userRecords("1"), nil)
			if len(out.Records) != 1 || out.Records[0].Fate != fate {
				t.Fatalf("%+v: want the record's fate %v, the cache back after 300 ms", out.Records, fate)
			}
		})
	}
}

// answer is what a front end answers: the records to retry, each once.
type answer struct{ Retry []retried }

type retried struct {
	Record string
	Err    error
}

func answerOf(o Outcome, err error) (answer, error) {
	var out answer
	named := map[string]bool{}
	for _, r := range o.Records {
		if r.Fate == Retry && !named[r.ID] {
			named[r.ID] = true
			out.Retry = append(out.Retry, retried{r.ID, r.Err})
		}
	}
	return out, err
}

func (o answer) ids() []string {
	ids := make([]string, len(o.Retry))
	for i, res := range o.Retry {
		ids[i] = res.Record
	}
	return ids
}
