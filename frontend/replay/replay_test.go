package replay

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/frontend/function/shape"
	"github.com/invalidator-go/invalidator/frontend/parking"
	"github.com/invalidator-go/invalidator/frontend/streams"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// streamTable makes a table with a stream, puts items, and returns the
// stream's ARN and the records the puts made.
func streamTable(t *testing.T, ids ...string) (string, []streamtypes.Record, string) {
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
	records := page.Records
	if len(records) != len(ids) {
		t.Fatalf("the stream holds %d records, want %d", len(records), len(ids))
	}
	return arn, records, shard
}

func TestReplayEveryKind(t *testing.T) {
	cache := testenv.Cache(t)
	ns := rand.Text()
	key := func(what string) string { return "cache:replay:" + ns + what }
	arn, records, shard := streamTable(t, ns+"range", ns+"truncated")
	table, _ := events.TableName(arn)
	rules, err := invalidate.ParseRules([]byte(`tables: {` + table + `: ["cache:replay:{key.id}"]}`))
	if err != nil {
		t.Fatal(err)
	}

	sqsRecord, _ := json.Marshal(shape.SQSMessage{MessageId: "m-sqs", Body: `{"entity":"replay","id":"` + ns + `sqs"}`})
	snsRecord, _ := json.Marshal(events.SNSRecord{SNS: events.SNSMessage{MessageID: "m-sns", Message: `{"entity":"replay","id":"` + ns + `sns"}`}})
	truncated, _ := json.Marshal(shape.DynamoDBEventRecord{EventName: "INSERT", EventSourceArn: arn,
		Change: shape.DynamoDBStreamRecord{SequenceNumber: aws.ToString(records[1].Dynamodb.SequenceNumber)}})
	asyncPayload, _ := json.Marshal(shape.SNSEvent{Records: []events.SNSRecord{{SNS: events.SNSMessage{
		MessageID: "m-async", Message: `{"entity":"replay","id":"` + ns + `async"}`}}}})
	seq := aws.ToString(records[0].Dynamodb.SequenceNumber)
	bodies := map[string]string{}
	for what, rec := range map[string]parking.Record{
		"sqs":       parking.New(events.SourceSQS, "sqs-invalidate", "m-sqs", "a bug since fixed", sqsRecord, time.Now()),
		"sns":       parking.New(events.SourceSNS, "sns-invalidate", "m-sns", "a bug since fixed", snsRecord, time.Now()),
		"truncated": {Kind: parking.Kind, Source: events.SourceDynamoDB, ID: "t", Reason: "too large", Record: truncated, Truncated: true},
		"bad":       parking.New(events.SourceSQS, "sqs-invalidate", "m-bad", "malformed", []byte(`{"messageId":"m-bad","body":"{"}`), time.Now()),
	} {
		body, err := rec.Encode()
		if err != nil {
			t.Fatal(err)
		}
		bodies[what] = string(body)
	}
	bodies["range"] = `{"requestContext":{"condition":"RecordAgeExceeded"},"DDBStreamBatchInfo":{"shardId":"` + shard +
		`","startSequenceNumber":"` + seq + `","endSequenceNumber":"` + seq + `","streamArn":"` + arn + `","batchSize":1}}`
	bodies["async"] = `{"requestContext":{"condition":"RetriesExhausted"},"requestPayload":` + string(asyncPayload) + `}`
	bodies["change"] = `{"entity":"replay","id":"` + ns + `change"}`

	q := testQueue(t)
	for _, b := range bodies {
		if _, err := awsenv.SQS(t).SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{key("sqs"), key("sns"), key("range"), key("truncated"), key("async"), key("change")}
	for _, k := range keys {
		if err := cache.Do(t.Context(), cache.B().Set().Key(k).Value("stale").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	r := &Replayer{SQS: awsenv.SQS(t), Streams: awsenv.Streams(t), QueueURL: q,
		Invalidator: invalidate.New(invalidate.Valkey(cache), invalidate.Options{Rules: rules})}
	var outcomes []Outcome
	replayed, failed, err := r.Run(t.Context(), func(o Outcome) { outcomes = append(outcomes, o) })
	if err != nil || replayed != 7 || failed != 1 {
		t.Fatalf("replayed %d, failed %d, %v; want 7 and 1: %+v", replayed, failed, err, outcomes)
	}
	var kinds []string
	for _, o := range outcomes {
		kinds = append(kinds, o.Kind)
		if (o.Error != "") == o.Deleted {
			t.Errorf("%+v: deleted exactly when it passed", o)
		}
	}
	slices.Sort(kinds)
	if want := []string{KindAsyncInvoke, KindChange, KindParked, KindParked, KindParked, KindParked, KindStreamRange}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %q, want %q", kinds, want)
	}
	for _, k := range keys {
		if n, err := cache.Do(t.Context(), cache.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("%s is still cached (%v)", k, err)
		}
	}
	// The one that failed again is left, visible, for the next run.
	out, err := awsenv.SQS(t).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 || !strings.Contains(aws.ToString(out.Messages[0].Body), "m-bad") {
		t.Fatalf("left in the queue: %+v (%v), want the bad record alone", out.Messages, err)
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
