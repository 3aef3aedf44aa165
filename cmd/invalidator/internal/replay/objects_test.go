package replay

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker"
)

// TestReplayReadsABucket: the objects a stream mapping's S3 on-failure
// destination writes — AWS's example for Kinesis, and one of a DynamoDB
// stream — are replayed from the event they hold, and left in place when
// kept; an object that is no such record fails, by its key, and stays.
func TestReplayReadsABucket(t *testing.T) {
	cache := testenv.Cache(t)
	golden, err := os.ReadFile("testdata/kinesis-s3-on-failure.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	ns := rand.Text()
	streamARN := "arn:aws:dynamodb:us-east-1:123456789012:table/Replayed/stream/2026-12-07T00:00:00.000"
	ddbEvent, _ := json.Marshal(lambdaevent.DynamoDBEvent{Records: []lambdaevent.DynamoDBEventRecord{{EventName: "MODIFY", EventSourceArn: streamARN,
		Change: lambdaevent.DynamoDBStreamRecord{SequenceNumber: "200", Keys: events.Image{"id": {Type: events.TypeString, S: ns}}}}}})
	ddbRecord, _ := json.Marshal(map[string]any{"requestContext": map[string]any{"condition": "RecordAgeExceeded"},
		"DDBStreamBatchInfo": map[string]any{"shardId": "shardId-00000001", "startSequenceNumber": "200", "endSequenceNumber": "200", "streamArn": streamARN, "batchSize": 1},
		"payload":            string(ddbEvent)})
	bucket, c := awsenv.Bucket(t), awsenv.S3(t)
	objects := map[string][]byte{
		"aws/lambda/0b1c/shardId-000000000001/2019/11/14/2019-11-14T00.38.06-1": golden,
		"aws/lambda/0b1c/shardId-00000001/2026/12/07/2026-12-07T10.00.00-2":     ddbRecord,
		"aws/lambda/0b1c/shardId-00000001/2026/12/07/2026-12-07T10.00.01-3":     []byte(`{"hello":"world"}`),
		"elsewhere": golden,
	}
	for key, body := range objects {
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"cache:replay-golden:s3-kinesis", "cache:replay:" + ns}
	for _, k := range keys {
		if err := cache.Do(t.Context(), cache.B().Set().Key(k).Value("stale").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	rules, err := invalidate.ParseRules([]byte(`tables: {Replayed: ["cache:replay:{key.id}"]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := &Replayer{S3: c, Bucket: bucket, Prefix: "aws/lambda/", Keep: true,
		Worker: quietWorker(invalidate.New(invalidate.Valkey(cache), invalidate.Options{Rules: rules}), worker.Options{})}
	var outcomes []Outcome
	replayed, failed, err := r.Run(t.Context(), func(o Outcome) { outcomes = append(outcomes, o) })
	if err != nil || replayed != 3 || failed != 1 {
		t.Fatalf("replayed %d, failed %d, %v; want the prefix's 3, 1 failed: %+v", replayed, failed, err, outcomes)
	}
	for _, o := range outcomes {
		switch {
		case strings.HasSuffix(o.MessageID, "-3"):
			if !strings.Contains(o.Error, "not Lambda's record") {
				t.Errorf("%+v: want it failed as no invocation record", o)
			}
		case o.Error != "" || o.Kind != KindStreamBatch || o.Records != 1 || o.Deleted:
			t.Errorf("%+v: want a stream batch of one record, replayed and kept", o)
		}
	}
	for _, k := range keys {
		if n, err := cache.Do(t.Context(), cache.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("%s is still cached (%v)", k, err)
		}
	}
	left := func() int {
		out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Contents)
	}
	if n := left(); n != len(objects) {
		t.Fatalf("%d objects left of %d: kept, they stay", n, len(objects))
	}
	r.Keep = false
	if replayed, failed, err := r.Run(t.Context(), func(Outcome) {}); err != nil || replayed != 3 || failed != 1 {
		t.Fatalf("replayed %d, failed %d, %v; want 3, 1 failed", replayed, failed, err)
	}
	if n := left(); n != 2 {
		t.Fatalf("%d objects left, want the one that failed and the one outside the prefix", n)
	}
}
