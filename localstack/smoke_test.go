package localstack

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

func TestSNSDeliversWrappedAndRaw(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	snsClient, sqsClient := awsenv.SNS(t), awsenv.SQS(t)
	wrappedQueue := queueURL(ctx, t, sqsClient, testenv.Getenv(t, "QUEUE_NAME"))
	rawQueue := queueURL(ctx, t, sqsClient, testenv.Getenv(t, "RAW_QUEUE_NAME"))

	marker := rand.Text()
	body := `{"entity":"smoke","id":"` + marker + `"}`
	if _, err := snsClient.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(testenv.Getenv(t, "TOPIC_ARN")),
		Message:  aws.String(body),
	}); err != nil {
		t.Fatalf("publish: %v", err)
	}

	var envelope struct{ Type, Message, TopicArn, MessageId string }
	wrapped := receiveOwn(ctx, t, sqsClient, wrappedQueue, marker)
	if err := json.Unmarshal([]byte(wrapped), &envelope); err != nil {
		t.Fatalf("wrapped body is not an SNS envelope: %v: %s", err, wrapped)
	}
	if envelope.Type != "Notification" || envelope.Message != body || envelope.MessageId == "" ||
		envelope.TopicArn != testenv.Getenv(t, "TOPIC_ARN") {
		t.Fatalf("envelope = %+v, want a Notification carrying %s", envelope, body)
	}
	if raw := receiveOwn(ctx, t, sqsClient, rawQueue, marker); raw != body {
		t.Fatalf("raw body = %s, want %s", raw, body)
	}
}

func queueURL(ctx context.Context, t *testing.T, c *sqs.Client, name string) string {
	t.Helper()
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("queue %s: %v (was localstack/up.sh run?)", name, err)
	}
	return *out.QueueUrl
}

// receiveOwn returns and deletes the message whose body contains marker.
// Other messages are left to be visible again in 3 s, for the queue is
// shared: at once, moto, which hands out the oldest first, would give the
// same ones again, and a backlog of ten hid the marker for good.
func receiveOwn(ctx context.Context, t *testing.T, c *sqs.Client, queue, marker string) string {
	t.Helper()
	for ctx.Err() == nil {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatalf("receive from %s: %v", queue, err)
		}
		for _, m := range out.Messages {
			if strings.Contains(*m.Body, marker) {
				if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queue), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatalf("delete: %v", err)
				}
				return *m.Body
			}
			_, _ = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(queue), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 3,
			})
		}
	}
	t.Fatalf("no message containing %s arrived in %s", marker, queue)
	return ""
}

func TestPutItemStreamsBothImages(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	db, streams := awsenv.DynamoDB(t), awsenv.Streams(t)
	table := testenv.Getenv(t, "TABLE_NAME")
	id := "smoke-" + rand.Text()

	for _, name := range []string{"before", "after"} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]ddbtypes.AttributeValue{
				"id":   &ddbtypes.AttributeValueMemberS{Value: id},
				"name": &ddbtypes.AttributeValueMemberS{Value: name},
			},
		}); err != nil {
			t.Fatalf("put item: %v", err)
		}
	}

	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("describe table: %v", err)
	}
	if desc.Table.StreamSpecification == nil || desc.Table.StreamSpecification.StreamViewType != ddbtypes.StreamViewTypeNewAndOldImages {
		t.Fatalf("table %s has no NEW_AND_OLD_IMAGES stream: %+v", table, desc.Table.StreamSpecification)
	}
	records := streamRecords(ctx, t, streams, *desc.Table.LatestStreamArn, id)
	if len(records) != 2 {
		t.Fatalf("got %d stream records for %s, want INSERT and MODIFY", len(records), id)
	}
	insert, modify := records[0], records[1]
	if insert.EventName != streamtypes.OperationTypeInsert || insert.Dynamodb.OldImage != nil ||
		imageName(insert.Dynamodb.NewImage) != "before" {
		t.Errorf("first record = %s old=%v new=%v, want INSERT with only the new image", insert.EventName, insert.Dynamodb.OldImage, insert.Dynamodb.NewImage)
	}
	if modify.EventName != streamtypes.OperationTypeModify || imageName(modify.Dynamodb.OldImage) != "before" ||
		imageName(modify.Dynamodb.NewImage) != "after" || modify.Dynamodb.SequenceNumber == nil {
		t.Errorf("second record = %s old=%v new=%v, want MODIFY from before to after", modify.EventName, modify.Dynamodb.OldImage, modify.Dynamodb.NewImage)
	}
}

// streamRecords reads every shard of the stream from its start and returns
// the records of item id, in order.
func streamRecords(ctx context.Context, t *testing.T, c *dynamodbstreams.Client, arn, id string) []streamtypes.Record {
	t.Helper()
	stream, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatalf("describe stream: %v", err)
	}
	var mine []streamtypes.Record
	for _, shard := range stream.StreamDescription.Shards {
		it, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: shard.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatalf("shard iterator: %v", err)
		}
		// moto never ends a shard (NextShardIterator is never nil): stop at an empty page.
		for iterator := it.ShardIterator; iterator != nil; {
			page, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iterator})
			if err != nil {
				t.Fatalf("get records: %v", err)
			}
			if len(page.Records) == 0 {
				break
			}
			for _, r := range page.Records {
				if key, ok := r.Dynamodb.Keys["id"].(*streamtypes.AttributeValueMemberS); ok && key.Value == id {
					mine = append(mine, r)
				}
			}
			iterator = page.NextShardIterator
		}
	}
	return mine
}

func imageName(image map[string]streamtypes.AttributeValue) string {
	if v, ok := image["name"].(*streamtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func TestCacheUnlinksAcrossSlots(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := testenv.Cache(t)
	prefix := "smoke:" + rand.Text() + ":"
	var keys []string
	for i := range 64 {
		keys = append(keys, prefix+string(rune('a'+i%26))+string(rune('0'+i/26)))
	}

	sets := make(valkey.Commands, 0, len(keys))
	for _, k := range keys {
		sets = append(sets, c.B().Set().Key(k).Value("v").Ex(time.Minute).Build())
	}
	for i, r := range c.DoMulti(ctx, sets...) {
		if err := r.Error(); err != nil {
			t.Fatalf("SET %s: %v", keys[i], err)
		}
	}
	if owners := owningNodes(ctx, t, c, keys); owners < 3 {
		t.Fatalf("keys landed on %d nodes, want the 3 masters: is the cluster complete?", owners)
	}

	for round, want := range []int64{1, 0} { // deleted, then already absent
		unlinks := make(valkey.Commands, 0, len(keys))
		for _, k := range keys {
			unlinks = append(unlinks, c.B().Unlink().Key(k).Build())
		}
		for i, r := range c.DoMulti(ctx, unlinks...) {
			if n, err := r.AsInt64(); err != nil || n != want {
				t.Fatalf("round %d: UNLINK %s = %d, %v; want %d", round, keys[i], n, err, want)
			}
		}
	}
}

// owningNodes counts the nodes that serve the keys: a node answers a key it
// does not own with MOVED.
func owningNodes(ctx context.Context, t *testing.T, c valkey.Client, keys []string) int {
	t.Helper()
	owners := 0
	for addr, node := range c.Nodes() {
		for _, k := range keys {
			err := node.Do(ctx, node.B().Exists().Key(k).Build()).Error()
			if err == nil {
				owners++
				break
			}
			if ret, ok := valkey.IsValkeyErr(err); !ok {
				t.Fatalf("EXISTS on %s: %v", addr, err)
			} else if _, moved := ret.IsMoved(); !moved {
				t.Fatalf("EXISTS on %s: %v", addr, err)
			}
		}
	}
	return owners
}

func TestCacheRefusesWhatElastiCacheRefuses(t *testing.T) {
	good := testenv.CacheConfig(t)
	testenv.Cache(t) // the right login works, so the refusals below are real

	plaintext := good
	plaintext.TLS, plaintext.CAFile = false, ""
	wrongPassword := good
	wrongPassword.Password = "not-" + good.Password
	defaultUser := good
	defaultUser.Username, defaultUser.Password = "", ""
	untrusted := good
	untrusted.CAFile = ""

	for name, tc := range map[string]struct {
		cfg  elasticache.Config
		want string
	}{
		"plaintext":             {plaintext, ""},
		"wrong password":        {wrongPassword, "WRONGPASS"},
		"default user disabled": {defaultUser, "NOAUTH"},
		"unknown CA":            {untrusted, "certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			client, err := elasticache.New(tc.cfg)
			if err == nil {
				client.Close()
				t.Fatal("connected, want a refusal")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestWorkerUserMayOnlyDelete(t *testing.T) {
	c, err := elasticache.New(testenv.WorkerCacheConfig(t))
	if err != nil {
		t.Fatalf("the worker user cannot connect: %v", err)
	}
	defer c.Close()
	ctx := t.Context()
	if err := c.Do(ctx, c.B().Unlink().Key("cache:smoke:worker").Build()).Error(); err != nil {
		t.Fatalf("UNLINK as the worker: %v", err)
	}
	// Its keys are the rules' (WORKER_KEYS): nothing else, even to delete.
	if err := c.Do(ctx, c.B().Unlink().Key("session:smoke").Build()).Error(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("UNLINK session:smoke as the worker: %v, want NOPERM", err)
	}
	for name, cmd := range map[string]valkey.Completed{
		"GET":      c.B().Get().Key("cache:smoke:worker").Build(),
		"SET":      c.B().Set().Key("cache:smoke:worker").Value("x").Build(),
		"FLUSHALL": c.B().Flushall().Build(),
	} {
		if err := c.Do(ctx, cmd).Error(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s as the worker: %v, want NOPERM", name, err)
		}
	}
}
