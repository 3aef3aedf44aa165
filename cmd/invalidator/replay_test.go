package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/localstack/esm"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// newQueue makes a queue named name, with attrs, holding bodies, deleted
// when the test ends, and returns its URL and ARN.
func newQueue(t *testing.T, name string, attrs map[string]string, bodies ...string) (url, arn string) {
	t.Helper()
	c := awsenv.SQS(t)
	q, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	for _, body := range bodies {
		if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(q.QueueUrl), out.Attributes["QueueArn"]
}

// changes are n change messages of entity user, their ids under ns.
func changes(ns string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = `{"entity":"user","id":"` + ns + "-" + strconv.Itoa(i) + `"}`
	}
	return out
}

// received are the distinct bodies of the queue's visible messages, read
// (and left visible) until want of them came or 5 s passed: counted by
// body, since the SDK may send one again after moto took it and its
// answer was lost (CI's fifth run saw six).
func received(t *testing.T, url string, want int) []string {
	t.Helper()
	c, seen := awsenv.SQS(t), map[string]bool{}
	for deadline := time.Now().Add(5 * time.Second); len(seen) < want && time.Now().Before(deadline); {
		out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			seen[aws.ToString(m.Body)] = true
			if _, err := c.ChangeMessageVisibility(t.Context(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var bodies []string
	for b := range seen {
		bodies = append(bodies, b)
	}
	return bodies
}

// waiting is how many messages the queue holds, visible or not.
func waiting(t *testing.T, url string) int {
	t.Helper()
	out, err := awsenv.SQS(t).GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	hidden, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible + hidden
}

// rules are the worker's rules of the tests that replay: the default
// template, given as the worker's.
const rules = `default: ["cache:{entity}:{id}"]`

// replayCLI runs invalidator replay with args, and returns its exit
// status and what it printed on stderr.
func replayCLI(args ...string) (int, string) {
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"replay"}, args...), &stdout, &stderr)
	return code, stderr.String()
}

// TestReplayRefusesWithoutRules: without the worker's rules replay would
// plan the default cache:{entity}:{id}, delete the wrong keys and the
// messages with them; it exits 2 having read nothing, a dry run too.
func TestReplayRefusesWithoutRules(t *testing.T) {
	cache := testenv.Cache(t)
	t.Setenv("INVALIDATION_RULES", "")
	t.Setenv("INVALIDATION_RULES_FILE", "")
	t.Setenv("SECOND_DELETE_QUEUE_URL", "")
	ns := strings.ToLower(rand.Text()[:10])
	key := "cache:user:" + ns + "-0"
	if err := cache.Do(t.Context(), cache.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	q, _ := newQueue(t, "test-cli-"+ns, nil, changes(ns, 5)...)
	for _, args := range [][]string{{"--queue", q}, {"--queue", q, "--dry-run"}} {
		if code, stderr := replayCLI(args...); code != 2 || !strings.Contains(stderr, "no rules") || !strings.Contains(stderr, "--default-rules") {
			t.Errorf("replay %q without rules: exit %d, %q; want 2 and why", args, code, stderr)
		}
	}
	if n, err := cache.Do(t.Context(), cache.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("%s was deleted (%v): replay without rules touched the cache", key, err)
	}
	if left := received(t, q, 5); len(left) != 5 {
		t.Errorf("%d of the 5 messages left: replay without rules consumed them", len(left))
	}
}

// TestReplayLeavesTheWorkersQueues: pointed at a queue the worker takes
// from — by its variable, by its name on the local stack or
// CloudFormation's, by its redrive policy — replay refuses, exits 2 and
// leaves every message; a DLQ, a failure queue, and with --left-behind an
// old queue named as a live one, it drains.
func TestReplayLeavesTheWorkersQueues(t *testing.T) {
	testenv.Cache(t)
	t.Setenv("INVALIDATION_RULES", rules)
	t.Setenv("SECOND_DELETE_QUEUE_URL", "")
	ns := strings.ToLower(rand.Text()[:10])
	queue := func(name string, attrs map[string]string) string {
		url, _ := newQueue(t, name, attrs, changes(ns, 5)...)
		return url
	}
	dlq, dlqARN := newQueue(t, "test-cli-"+ns+"-dlq-of-another", nil, changes(ns, 5)...)
	redrive := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":"5"}`}
	live, delay, old := queue("test-cli-"+ns+"-live", nil), queue("test-cli-"+ns+"-delay", nil), queue("test"+ns+"-Queue-OLD"+ns, redrive)
	for _, c := range []struct {
		url  string
		env  map[string]string
		args []string
		why  string // of the refusal; "" for a queue replay drains
	}{
		{url: live, env: map[string]string{"QUEUE_URL": live + "/"}, why: "QUEUE_URL"},
		{url: live, env: map[string]string{"QUEUE_URL": live}, args: []string{"--dry-run"}, why: "QUEUE_URL"},
		{url: delay, env: map[string]string{"SECOND_DELETE_QUEUE_URL": delay}, why: "SECOND_DELETE_QUEUE_URL"},
		{url: queue("test"+ns+"-SecondDeleteQueue-A1B2", nil), why: "-SecondDeleteQueue-"},
		{url: queue("test"+ns+"-Queue-C3D4", nil), why: "-Queue-"},
		{url: queue("test-"+ns+"-cache-invalidation-again", nil), why: "cache-invalidation-again"},
		{url: queue("test-"+ns+"-cache-invalidation-window", nil), why: "cache-invalidation-window"},
		{url: queue("test-cli-"+ns+"-with-a-dlq", redrive), why: "dead-letter queue"},
		{url: old, env: map[string]string{"QUEUE_URL": old}, args: []string{"--left-behind"}, why: "QUEUE_URL"},
		{url: dlq},
		{url: queue("test"+ns+"-FailureQueue-E5F6", nil)},
		{url: old, args: []string{"--left-behind"}},
	} {
		t.Run(c.url[strings.LastIndex(c.url, "/")+1:]+strings.Join(c.args, ""), func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, stderr := replayCLI(append([]string{"--queue", c.url}, c.args...)...)
			if c.why == "" {
				if left := waiting(t, c.url); code != 0 || left != 0 {
					t.Errorf("exit %d, %q, %d messages left: want the queue drained", code, stderr, left)
				}
				return
			}
			if code != 2 || !strings.Contains(stderr, "refused") || !strings.Contains(stderr, c.why) {
				t.Errorf("exit %d, %q: want 2 and a refusal naming %q", code, stderr, c.why)
			}
			if left := received(t, c.url, 5); len(left) != 5 {
				t.Errorf("%d of the 5 messages left: want replay to consume none of a queue of the worker's", len(left))
			}
		})
	}
}

// TestReplayDeletesAsTheWorker: replay keeps the worker's ECPU budget —
// its share of CACHE_MAX_ECPU_PER_SECOND, or --ecpu-per-second — and
// schedules a second delete of what it deleted, as the worker does.
func TestReplayDeletesAsTheWorker(t *testing.T) {
	testenv.Cache(t)
	t.Setenv("INVALIDATION_RULES", rules)
	ns := strings.ToLower(rand.Text()[:10])
	delay, _ := newQueue(t, "test-cli-"+ns+"-again", nil)
	t.Setenv("SECOND_DELETE_QUEUE_URL", delay)
	t.Setenv("SECOND_DELETE_DELAY", "1s")
	t.Setenv("FAILOVER_REDELETE_AFTER", "0s")
	t.Setenv("CACHE_WORKER_ECPU_SHARE", "1") // of ElastiCache's least maximum, 1,000: 10 a second
	// Three messages of 20 keys, an ECPU each: the pacer lets one go at
	// once and the next wait out its cost, 4 s at 10 ECPUs a second.
	var bodies, keys []string
	for m := range 3 {
		var these []string
		for i := range 20 {
			these = append(these, "cache:cli:"+ns+":"+strconv.Itoa(m*20+i))
		}
		body, _ := json.Marshal(map[string][]string{"keys": these})
		bodies, keys = append(bodies, string(body)), append(keys, these...)
	}
	for _, c := range []struct {
		name, most string
		args       []string
	}{
		{"the worker's share", "1000", nil},
		{"--ecpu-per-second", "", []string{"--ecpu-per-second", "10"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CACHE_MAX_ECPU_PER_SECOND", c.most)
			q, _ := newQueue(t, "test-cli-"+ns+"-"+strconv.Itoa(len(c.args)), nil, bodies...)
			start := time.Now()
			code, stderr := replayCLI(append([]string{"--queue", q}, c.args...)...)
			took := time.Since(start)
			if code != 0 {
				t.Fatalf("exit %d, %q; want 0", code, stderr)
			}
			if took < 3500*time.Millisecond {
				t.Errorf("done after %v; want 4 s at least, paced at 10 ECPUs a second", took.Round(time.Millisecond))
			}
			var again []string
			for _, b := range received(t, delay, 3) {
				var m struct {
					Keys         []string `json:"keys"`
					SecondDelete bool     `json:"secondDelete"`
				}
				if json.Unmarshal([]byte(b), &m) == nil && m.SecondDelete {
					again = append(again, m.Keys...)
				}
			}
			slices.Sort(again)
			if again = slices.Compact(again); len(again) != len(keys) {
				t.Errorf("%d keys scheduled to be deleted again, want the %d replayed", len(again), len(keys))
			}
		})
	}
}

// refused is a stream function that fails every invoke.
type refused struct{}

func (refused) Invoke(context.Context, any) ([]byte, error) { return nil, errors.New("refused") }

// TestReplayReadsWhatAMappingKept: a record the local Kinesis mapping gives
// up on goes to its bucket whole, as Lambda's S3 destination keeps it;
// replay --s3 deletes its keys and leaves the object, unless --delete.
func TestReplayReadsWhatAMappingKept(t *testing.T) {
	cache := testenv.Cache(t)
	t.Setenv("INVALIDATION_RULES", rules)
	t.Setenv("SECOND_DELETE_QUEUE_URL", "")
	key := "cache:cli:" + strings.ToLower(rand.Text()[:10])
	k, arn, bucket, c := awsenv.Kinesis(t), awsenv.KinesisStream(t, 1), awsenv.Bucket(t), awsenv.S3(t)
	body, _ := json.Marshal(map[string][]string{"keys": {key}})
	if _, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamARN: aws.String(arn), PartitionKey: aws.String("p"), Data: body}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	m := &esm.KinesisMapping{Client: k, StreamARN: arn, Region: "us-east-1", Settings: esm.Settings{Function: refused{}, MaxRetryAttempts: 1,
		Backoff: 10 * time.Millisecond, OnFailure: esm.Bucket{Client: c, Name: bucket, Mapping: "kinesis-invalidate test"}}}
	go func() { done <- m.Run(ctx) }()
	objects := func() []string {
		out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys
	}
	for deadline := time.Now().Add(10 * time.Second); len(objects()) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	kept := objects()
	if len(kept) != 1 || !strings.HasPrefix(kept[0], "aws/lambda/") {
		t.Fatalf("objects %q: want the record given up on, under aws/lambda/", kept)
	}
	if err := cache.Do(t.Context(), cache.B().Set().Key(key).Value("stale").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"replay", "--s3", "s3://" + bucket + "/aws/lambda/", "--json"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), `"kind":"stream-batch"`) {
		t.Fatalf("replay --s3: exit %d, %q, %q: want the batch replayed from the records the object holds", code, stdout.String(), stderr.String())
	}
	if n, err := cache.Do(t.Context(), cache.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("%s is still cached (%v)", key, err)
	}
	if left := objects(); len(left) != 1 {
		t.Fatalf("objects %q after replay: want the one kept, left in place", left)
	}
	if code, stderr := replayCLI("--s3", "s3://"+bucket+"/aws/lambda/", "--delete"); code != 0 || len(objects()) != 0 {
		t.Fatalf("replay --s3 --delete: exit %d, %q, objects %q left: want none", code, stderr, objects())
	}
}
