package functions

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
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/esm"
	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
)

// mapping runs an event source mapping for the rest of the test.
func mapping(t *testing.T, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mapping: %v", err)
		}
	})
}

func gone(t *testing.T, c valkey.Client, keys ...string) func() bool {
	return func() bool { return missing(t, c, keys) == len(keys) }
}

func str(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }

func TestTableChangesReachTheStreamFunction(t *testing.T) {
	c := testenv.Cache(t)
	table, stream := awsenv.Table(t)
	fn := emulator(t, "stream-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: []string{
		"INVALIDATION_RULES=" + strings.ReplaceAll(streamRules, "Products", table)}})
	mapping(t, (&esm.StreamMapping{Client: awsenv.Streams(t), StreamARN: stream, Settings: esm.Settings{Function: fn}}).Run)
	db := awsenv.DynamoDB(t)
	ns := rand.Text()
	product, catA, catB := "cache:product:"+ns, "cache:category:A"+ns, "cache:category:B"+ns

	setKeys(t, c, product, catA, catB)
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table),
		Item: map[string]ddbtypes.AttributeValue{"id": str(ns), "category": str("A" + ns)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "PutItem did not invalidate the product and its category", gone(t, c, product, catA))

	setKeys(t, c, product, catA)
	if _, err := db.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"id": str(ns)}, UpdateExpression: aws.String("SET category = :c"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": str("B" + ns)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "UpdateItem did not invalidate the product and both categories", gone(t, c, product, catA, catB))

	setKeys(t, c, product, catB)
	if _, err := db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"id": str(ns)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "DeleteItem did not invalidate the product and its category", gone(t, c, product, catB))
}

func TestSNSToSQSToTheFunction(t *testing.T) {
	c := testenv.Cache(t)
	q := newQueue(t, 30*time.Second, 5)
	topic := newTopic(t, q)
	fn := emulator(t, "sqs-invalidate", testenv.WorkerCacheConfig(t), rie.Options{})
	mapping(t, (&esm.SQSMapping{Client: awsenv.SQS(t), QueueURL: q.URL, Functions: []esm.Invoker{fn}, WaitTime: time.Second}).Run)
	key := "cache:product:" + rand.Text()
	setKeys(t, c, key)
	if _, err := awsenv.SNS(t).Publish(t.Context(), &sns.PublishInput{TopicArn: aws.String(topic),
		Message: aws.String(`{"entity":"product","id":"` + strings.TrimPrefix(key, "cache:product:") + `"}`)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the published change did not invalidate its key", gone(t, c, key))
	eventually(t, 15*time.Second, "the message was not deleted", func() bool { return messages(t, q.URL) == 0 })
}

// TestPoisonMessageIsParked: a message that can never be decoded is
// parked at once, whole, and deleted; it uses no retries and never reaches
// the DLQ.
func TestPoisonMessageIsParked(t *testing.T) {
	c := testenv.Cache(t)
	q := newQueue(t, 30*time.Second, 5)
	failures, env := failureQueue(t)
	ns := rand.Text()
	good := []string{"cache:user:" + ns + "1", "cache:user:" + ns + "2", "cache:user:" + ns + "3"}
	setKeys(t, c, good...)
	// One batch: the poison message between good ones.
	entries := []string{`{"entity":"user","id":"` + ns + `1"}`, `{"entity":"user","id":"` + ns + `2"}`, `{"entity":"user","id":`, `{"entity":"user","id":"` + ns + `3"}`}
	batch := &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.URL)}
	for i, body := range entries {
		batch.Entries = append(batch.Entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(string(rune('a' + i))), MessageBody: aws.String(body)})
	}
	if _, err := awsenv.SQS(t).SendMessageBatch(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	fn := emulator(t, "sqs-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: env})
	mapping(t, (&esm.SQSMapping{Client: awsenv.SQS(t), QueueURL: q.URL, Functions: []esm.Invoker{fn}, WaitTime: time.Second}).Run)

	eventually(t, 15*time.Second, "the good messages of the batch were not processed", gone(t, c, good...))
	// At least once: the SDK sends a batch again when it cannot read moto's
	// answer, and the poison message then arrives, and is parked, twice.
	p := parked(t, failures, 1)
	if len(p) == 0 {
		t.Fatal("nothing parked, want the poison message")
	}
	for _, r := range p {
		if r.Content != failurequeue.Body || string(r.Data) != entries[2] || !strings.Contains(r.Reason, "malformed JSON") {
			t.Fatalf("parked %+v, want the poison message's body as it came, and why", r)
		}
	}
	eventually(t, 15*time.Second, "the queue was not emptied", func() bool { return messages(t, q.URL) == 0 })
	if n := messages(t, q.DLQ); n != 0 {
		t.Fatalf("%d messages in the DLQ, want none", n)
	}
}

// TestFailingStreamRecordIsParked: a stream record whose keys cannot be
// planned is parked with its content, and the shard moves on at once.
func TestFailingStreamRecordIsParked(t *testing.T) {
	c := testenv.Cache(t)
	table, stream := awsenv.Table(t)
	failures, env := failureQueue(t)
	fn := emulator(t, "stream-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: append(env,
		"INVALIDATION_RULES=tables: {"+table+`: ["cache:product:{key.id}:{new.category}"]}`)})
	mapping(t, (&esm.StreamMapping{Client: awsenv.Streams(t), StreamARN: stream, Settings: esm.Settings{Function: fn}}).Run)
	db := awsenv.DynamoDB(t)
	put := func(item map[string]ddbtypes.AttributeValue) {
		if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	ns := rand.Text()
	put(map[string]ddbtypes.AttributeValue{"id": str(ns + "bad")}) // no category: the key cannot be planned
	key := "cache:product:" + ns + "good:shoes"
	setKeys(t, c, key)
	put(map[string]ddbtypes.AttributeValue{"id": str(ns + "good"), "category": str("shoes")})
	eventually(t, 10*time.Second, "the stream did not move past the bad record", gone(t, c, key))
	p := parked(t, failures, 1)
	var rec struct {
		Change struct{ Keys map[string]struct{ S string } } `json:"dynamodb"`
	}
	if len(p) != 1 || p[0].Content != failurequeue.WholeRecord || json.Unmarshal(p[0].Data, &rec) != nil || rec.Change.Keys["id"].S != ns+"bad" || p[0].Source != "dynamodb" {
		t.Fatalf("parked %+v, want the bad stream record, whole", p)
	}
}

// TestSecondDeleteUnderTheEmulator: a key filled again after its change was
// invalidated — a load that read the source before the change — is deleted
// again, through the delay queue, which the same function consumes.
func TestSecondDeleteUnderTheEmulator(t *testing.T) {
	c := testenv.Cache(t)
	q, again := newQueue(t, 30*time.Second, 100), newQueue(t, 30*time.Second, 100)
	fn := emulator(t, "sqs-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: []string{
		"SECOND_DELETE_QUEUE_URL=" + again.URL, "SECOND_DELETE_DELAY=2s"}})
	mapping(t, (&esm.SQSMapping{Client: awsenv.SQS(t), QueueURL: q.URL, Functions: []esm.Invoker{fn}, WaitTime: time.Second}).Run)
	mapping(t, (&esm.SQSMapping{Client: awsenv.SQS(t), QueueURL: again.URL, Functions: []esm.Invoker{fn}, WaitTime: time.Second}).Run)
	key := "cache:product:" + rand.Text()
	setKeys(t, c, key)
	start := time.Now()
	sendRaw(t, q, `{"entity":"product","id":"`+strings.TrimPrefix(key, "cache:product:")+`"}`)
	eventually(t, 15*time.Second, "the first delete did not come", gone(t, c, key))
	setKeys(t, c, key) // a stale fill, landing after the invalidation
	eventually(t, 10*time.Second, "the second delete did not come", gone(t, c, key))
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("deleted again after %v, want no sooner than the 2 s delay", took)
	}
	eventually(t, 10*time.Second, "the delay queue was not emptied", func() bool { return messages(t, again.URL) == 0 })
	if n := messages(t, q.DLQ) + messages(t, again.DLQ); n != 0 {
		t.Fatalf("%d messages dead-lettered, want none", n)
	}
}
