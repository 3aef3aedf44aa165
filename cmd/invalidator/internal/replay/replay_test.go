package replay

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/worker/streams"
)

// streamTable makes a table with a stream, puts items, and returns the
// stream's ARN and the records the puts made.
func streamTable(t *testing.T, ids ...string) (string, string, []streamtypes.Record, string) {
	t.Helper()
	db, st := awsenv.DynamoDB(t), awsenv.Streams(t)
	name, arn := awsenv.Table(t)
	for _, id := range ids {
		if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(name),
			Item: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	desc, err := st.DescribeStream(t.Context(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	shard := aws.ToString(desc.StreamDescription.Shards[0].ShardId)
	iterator, err := streams.Iterator(t.Context(), st, arn, shard, streamtypes.ShardIteratorTypeTrimHorizon, "")
	if err != nil {
		t.Fatal(err)
	}
	page, err := st.GetRecords(t.Context(), &dynamodbstreams.GetRecordsInput{ShardIterator: iterator})
	if err != nil {
		t.Fatal(err)
	}
	// One record an item: a put the SDK sent again after moto had applied
	// it (the answer lost on a loaded machine) shows twice.
	var records []streamtypes.Record
	seen := map[string]bool{}
	for _, r := range page.Records {
		id, _ := r.Dynamodb.Keys["id"].(*streamtypes.AttributeValueMemberS)
		if id != nil && !seen[id.Value] {
			seen[id.Value] = true
			records = append(records, r)
		}
	}
	if len(records) != len(ids) {
		t.Fatalf("the stream holds records of %d items, want %d", len(records), len(ids))
	}
	return name, arn, records, shard
}

// v1 is a record as versions before message attributes parked it: one
// JSON object, the record as Lambda delivered it inside.
func v1(source events.Source, id string, record []byte, truncated bool) string {
	body, _ := json.Marshal(map[string]any{"kind": failurequeue.KindV1, "source": source, "function": "f", "recordId": id,
		"reason": "a bug since fixed", "parkedAt": time.Now(), "record": json.RawMessage(record), "truncated": truncated})
	return string(body)
}

// TestReplayEveryKind: every kind of message the failure path leaves,
// records parked in this version's form and in the earlier one's among
// them, against moto, the stream and the cache.
func TestReplayEveryKind(t *testing.T) {
	cache := testenv.Cache(t)
	ns := rand.Text()
	key := func(what string) string { return "cache:replay:" + ns + what }
	table, arn, records, shard := streamTable(t, ns+"range", ns+"truncated", ns+"truncated-v1", ns+"whole")
	rules, err := invalidate.ParseRules([]byte(`tables: {` + table + `: ["cache:replay:{key.id}"]}`))
	if err != nil {
		t.Fatal(err)
	}

	sqsRecord := func(what string) []byte {
		// As Lambda hands it: a body JSON escapes much of, and its time.
		raw, _ := json.Marshal(lambdaevent.SQSMessage{MessageId: "m-" + what, Body: `{"entity":"replay","id":"` + ns + what + `","note":"<&>\"\n"}`,
			Attributes: map[string]string{"SentTimestamp": "1796000000000"}})
		return raw
	}
	snsRecord := func(what string) []byte {
		raw, _ := json.Marshal(events.SNSRecord{SNS: events.SNSMessage{MessageID: "m-" + what, Message: `{"entity":"replay","id":"` + ns + what + `"}`, Timestamp: time.Now()}})
		return raw
	}
	streamRecord := func(i int, images bool) []byte {
		rec := lambdaevent.DynamoDBEventRecord{EventName: "INSERT", EventSourceArn: arn,
			Change: lambdaevent.DynamoDBStreamRecord{SequenceNumber: aws.ToString(records[i].Dynamodb.SequenceNumber)}}
		if images {
			rec.Change.Keys = events.Image{"id": {Type: events.TypeString, S: records[i].Dynamodb.Keys["id"].(*streamtypes.AttributeValueMemberS).Value}}
		}
		raw, _ := json.Marshal(rec)
		return raw
	}
	asyncPayload, _ := json.Marshal(lambdaevent.SNSEvent{Records: []events.SNSRecord{{SNS: events.SNSMessage{
		MessageID: "m-async", Message: `{"entity":"replay","id":"` + ns + `async"}`}}}})
	seq := aws.ToString(records[0].Dynamodb.SequenceNumber)
	var msgs []queues.Outgoing
	for _, rec := range []failurequeue.Record{
		parkedAs(events.SourceSQS, "sqs-invalidate", "m-sqs", "a bug since fixed", sqsRecord("sqs"), time.Now()),
		parkedAs(events.SourceSNS, "sns-invalidate", "m-sns", "a bug since fixed", snsRecord("sns"), time.Now()),
		parkedAs(events.SourceDynamoDB, "stream-invalidate", "w", "a bug since fixed", streamRecord(3, true), time.Now()),
		{Source: events.SourceDynamoDB, ID: "t", Reason: "too large", Content: failurequeue.RecordWithoutImages, Data: streamRecord(1, false)},
		parkedAs(events.SourceSQS, "sqs-invalidate", "m-bad", "malformed", []byte(`{"messageId":"m-bad","body":"{"}`), time.Now()),
	} {
		in, err := rec.Message(failurequeue.MaxBytes)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, in)
	}
	for _, body := range []string{
		v1(events.SourceSQS, "m-sqs-v1", sqsRecord("sqs-v1"), false),
		v1(events.SourceSNS, "m-sns-v1", snsRecord("sns-v1"), false),
		v1(events.SourceDynamoDB, "t", streamRecord(2, false), true),
		`{"requestContext":{"condition":"RecordAgeExceeded"},"DDBStreamBatchInfo":{"shardId":"` + shard +
			`","startSequenceNumber":"` + seq + `","endSequenceNumber":"` + seq + `","streamArn":"` + arn + `","batchSize":1}}`,
		`{"requestContext":{"condition":"RetriesExhausted"},"requestPayload":` + string(asyncPayload) + `}`,
		`{"entity":"replay","id":"` + ns + `change"}`,
	} {
		msgs = append(msgs, queues.Outgoing{Body: body})
	}

	q := testQueue(t)
	for _, m := range msgs {
		if err := queues.Send(t.Context(), awsenv.SQS(t), q, m); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{key("sqs"), key("sns"), key("range"), key("truncated"), key("whole"), key("sqs-v1"), key("sns-v1"), key("truncated-v1"), key("async"), key("change")}
	for _, k := range keys {
		if err := cache.Do(t.Context(), cache.B().Set().Key(k).Value("stale").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	r := &Replayer{SQS: awsenv.SQS(t), Streams: awsenv.Streams(t), QueueURL: q,
		Worker: quietWorker(invalidate.New(invalidate.Valkey(cache), invalidate.Options{Rules: rules}), worker.Options{})}
	var outcomes []Outcome
	replayed, failed, err := r.Run(t.Context(), func(o Outcome) { outcomes = append(outcomes, o) })
	if err != nil || replayed != len(msgs) || failed != 1 {
		t.Fatalf("replayed %d, failed %d, %v; want %d and 1: %+v", replayed, failed, err, len(msgs), outcomes)
	}
	var kinds []string
	for _, o := range outcomes {
		kinds = append(kinds, o.Kind)
		if (o.Error != "") == o.Deleted {
			t.Errorf("%+v: deleted exactly when it passed", o)
		}
	}
	slices.Sort(kinds)
	want := []string{KindAsyncInvoke, KindChange, KindParked, KindParked, KindParked, KindParked, KindParked, KindParked, KindParked, KindParked, KindStreamRange}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds %q, want %q", kinds, want)
	}
	for _, k := range keys {
		if n, err := cache.Do(t.Context(), cache.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("%s is still cached (%v)", k, err)
		}
	}
	// The one that failed again is left, visible, for the next run.
	out, err := awsenv.SQS(t).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("left in the queue: %+v (%v), want the bad record alone", out.Messages, err)
	}
	if p, _, _ := failurequeue.Parse(aws.ToString(out.Messages[0].Body), queues.Strings(out.Messages[0].MessageAttributes)); p.ID != "m-bad" {
		t.Fatalf("left in the queue: %+v, want the bad record", p)
	}
}

func testQueue(t *testing.T) string {
	t.Helper()
	c := awsenv.SQS(t)
	out, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("test-replay-" + strings.ToLower(rand.Text()[:12]))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return aws.ToString(out.QueueUrl)
}

// quietWorker is a worker over inv whose logs and metrics go nowhere.
func quietWorker(inv *invalidate.Invalidator, opts worker.Options) *worker.Worker {
	opts.Logger, opts.Metrics = slog.New(slog.DiscardHandler), io.Discard
	return worker.New(inv, opts)
}

// TestReplaySchedulesSecondDeletes: what replay deletes is deleted again
// later, as the worker's deletes are — but for a second delete itself —,
// and a message whose second delete cannot be scheduled fails and stays.
func TestReplaySchedulesSecondDeletes(t *testing.T) {
	cache := testenv.Cache(t)
	ns := rand.Text()
	q, delay := testQueue(t), testQueue(t)
	for _, body := range []string{`{"entity":"replay","id":"` + ns + `"}`, `{"keys":["cache:replay:` + ns + `-again"],"secondDelete":true}`} {
		if _, err := awsenv.SQS(t).SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	replayer := func(delayQueue string) *Replayer {
		inv := invalidate.New(invalidate.Valkey(cache), invalidate.Options{Rules: invalidate.DefaultRules()})
		again, _ := worker.Config{SecondDeleteQueueURL: delayQueue, SecondDeleteDelay: time.Second}.Again(awsenv.SQS(t))
		return &Replayer{SQS: awsenv.SQS(t), QueueURL: q, Worker: quietWorker(inv, worker.Options{SecondDelete: again})}
	}
	if replayed, failed, err := replayer(delay).Run(t.Context(), func(Outcome) {}); err != nil || replayed < 2 || failed != 0 {
		t.Fatalf("replayed %d, failed %d, %v; want both messages done", replayed, failed, err)
	}
	var again []string
	for deadline := time.Now().Add(5 * time.Second); len(again) == 0 && time.Now().Before(deadline); {
		out, err := awsenv.SQS(t).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(delay), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			again = append(again, aws.ToString(m.Body))
		}
	}
	if want := `{"keys":["cache:replay:` + ns + `"],"secondDelete":true}`; !slices.Equal(slices.Compact(again), []string{want}) {
		t.Errorf("the delay queue holds %q, want %s alone", again, want)
	}

	// A delay queue that is not there: the message fails, and stays.
	if _, err := awsenv.SQS(t).SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(`{"entity":"replay","id":"` + ns + `-2"}`)}); err != nil {
		t.Fatal(err)
	}
	var outcomes []Outcome
	if _, failed, err := replayer(delay+"-gone").Run(t.Context(), func(o Outcome) { outcomes = append(outcomes, o) }); err != nil || failed == 0 {
		t.Fatalf("failed %d, %v: %+v; want the message whose second delete was not scheduled to fail", failed, err, outcomes)
	}
	for _, o := range outcomes {
		if o.Deleted || !strings.Contains(o.Error, "second delete not scheduled") {
			t.Errorf("%+v: want it failed for its second delete, and left", o)
		}
	}
}

// parkedAs is failurequeue.New of a raw record as the worker decodes it,
// its ID id.
func parkedAs(source events.Source, function, id, reason string, raw []byte, at time.Time) failurequeue.Record {
	d, _, _ := events.Decode(source, raw, events.Attributes{})
	d.ID = id
	return failurequeue.New(source, function, d, reason, raw, at)
}

// TestReplayReadsKinesis: what the Kinesis path leaves in the failure
// queue — its mapping's coordinates of a batch given up on, and a record
// parked without its data — is read again from the stream and its keys
// deleted; a range the stream no longer holds fails, saying so.
func TestReplayReadsKinesis(t *testing.T) {
	cache := testenv.Cache(t)
	ns := rand.Text()
	key := func(what string) string { return "cache:replay:" + ns + what }
	k := awsenv.Kinesis(t)
	arn := awsenv.KinesisStream(t, 1)
	var seqs []string
	var shard string
	for _, what := range []string{"first", "second", "third"} {
		out, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamARN: aws.String(arn), PartitionKey: aws.String("p"),
			Data: []byte(`{"entity":"replay","id":"` + ns + what + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		seqs, shard = append(seqs, aws.ToString(out.SequenceNumber)), aws.ToString(out.ShardId)
	}
	parked, _ := json.Marshal(map[string]any{"eventSource": "aws:kinesis", "eventSourceARN": arn, "eventID": shard + ":" + seqs[2],
		"kinesis": map[string]any{"sequenceNumber": seqs[2], "partitionKey": "p", "data": ""}})
	rec := failurequeue.Record{Source: events.SourceKinesis, ID: seqs[2], Reason: "too large", Content: failurequeue.RecordWithoutImages, Data: parked}
	in, err := rec.Message(failurequeue.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(start, end string) queues.Outgoing {
		return queues.Outgoing{Body: `{"requestContext":{"condition":"RetryAttemptsExhausted"},"KinesisBatchInfo":{"shardId":"` + shard +
			`","startSequenceNumber":"` + start + `","endSequenceNumber":"` + end + `","streamArn":"` + arn + `","batchSize":2}}`}
	}
	q := testQueue(t)
	for _, m := range []queues.Outgoing{batch(seqs[0], seqs[1]), in} {
		if err := queues.Send(t.Context(), awsenv.SQS(t), q, m); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{key("first"), key("second"), key("third")}
	for _, k := range keys {
		if err := cache.Do(t.Context(), cache.B().Set().Key(k).Value("stale").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	r := &Replayer{SQS: awsenv.SQS(t), Kinesis: k, QueueURL: q, Worker: quietWorker(invalidate.New(invalidate.Valkey(cache), invalidate.Options{}), worker.Options{})}
	var outcomes []Outcome
	if replayed, failed, err := r.Run(t.Context(), func(o Outcome) { outcomes = append(outcomes, o) }); err != nil || replayed != 2 || failed != 0 {
		t.Fatalf("replayed %d, failed %d, %v; want 2 and none: %+v", replayed, failed, err, outcomes)
	}
	for _, o := range outcomes {
		if o.Source != events.SourceKinesis || o.Kind == KindStreamRange && o.Records != 2 || o.Kind == KindParked && o.Records != 1 {
			t.Errorf("%+v: want the range's 2 records, or the parked one, from Kinesis", o)
		}
	}
	for _, k := range keys {
		if n, err := cache.Do(t.Context(), cache.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("%s is still cached (%v)", k, err)
		}
	}
	if _, err := r.kinesisRange(t.Context(), lambdaStreamBatch{ShardID: shard, Start: "4" + seqs[2][1:] + "0", End: "4" + seqs[2][1:] + "0", StreamARN: arn}); err == nil {
		t.Errorf("a range past the stream's records was read: want it failed")
	}
}
