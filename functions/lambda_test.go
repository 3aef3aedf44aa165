package functions

import (
	"context"
	"crypto/rand"
	"encoding/json"
	lambdaevents "github.com/aws/aws-lambda-go/events"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
)

const streamRules = `tables: {Products: ["cache:product:{key.id}", "cache:category:{item.category}"]}`

// emulator runs function name under the emulator. It sends no second
// deletes unless opts.Env names a delay queue: the stack's own is shared.
func emulator(t *testing.T, name string, cfg elasticache.Config, opts rie.Options) *rie.Emulator {
	t.Helper()
	opts.Env = append(append([]string{"SECOND_DELETE_QUEUE_URL="}, opts.Env...), cfg.Env()...)
	e, err := rie.Start(binary(name), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func setKeys(t *testing.T, c valkey.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := c.Do(t.Context(), c.B().Set().Key(k).Value("cached").Ex(time.Minute).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

func requireGone(t *testing.T, c valkey.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if n, err := c.Do(t.Context(), c.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("key %s still exists (%v)", k, err)
		}
	}
}

// batchFailures invokes fn and returns the item identifiers its batch
// response reports failed (SQS and stream responses share the shape).
func batchFailures(t *testing.T, fn *rie.Emulator, event any) []string {
	t.Helper()
	out, err := fn.Invoke(t.Context(), event)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.BatchItemFailures == nil {
		t.Fatalf("response %s: %v; want a batch response with its failure list", out, err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed
}

func sqsMessage(id, body string) lambdaevent.SQSMessage {
	return lambdaevent.SQSMessage{
		MessageId: id, ReceiptHandle: "handle-" + id, Body: body, EventSource: "aws:sqs", AWSRegion: "us-east-1",
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:cache-invalidation",
		Attributes:     map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10)},
	}
}

func snsEnvelope(message string) string {
	b, _ := json.Marshal(map[string]string{
		"Type": "Notification", "MessageId": "e0b1c2d3-0000-4000-8000-000000000001", "TopicArn": "arn:aws:sns:us-east-1:123456789012:cache-changes",
		"Message": message, "Timestamp": time.Now().UTC().Format(time.RFC3339Nano), "SignatureVersion": "1", "Signature": "c2lnbmF0dXJl",
	})
	return string(b)
}

func TestSQSFunctionUnderTheEmulator(t *testing.T) {
	c := testenv.Cache(t)
	ns := rand.Text()
	key := func(id string) string { return "cache:product:" + ns + id }
	setKeys(t, c, key("raw"), key("sns"), key("eb"), key("a1"), key("a2"), "cache:explicit:"+ns, "session:"+ns)
	failures, env := failureQueue(t)
	fn := emulator(t, "sqs-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: env})

	ev := lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{
		sqsMessage("raw", `{"entity":"product","id":"`+ns+`raw"}`),
		sqsMessage("sns", snsEnvelope(`{"entity":"product","id":"`+ns+`sns","op":"update"}`)),
		sqsMessage("eventbridge", `{"version":"0","id":"1","detail-type":"ProductChanged","source":"catalog","time":"2026-11-29T12:00:00Z","detail":{"entity":"product","id":"`+ns+`eb"}}`),
		sqsMessage("array", `[{"entity":"product","id":"`+ns+`a1"},{"entity":"product","id":"`+ns+`a2"}]`),
		sqsMessage("explicit", `{"keys":["cache:explicit:`+ns+`"]}`),
		sqsMessage("session", `{"keys":["session:`+ns+`"]}`), // outside the rules' keys (cache:*)
		sqsMessage("not-json", `<xml/>`),
		sqsMessage("no-id", `{"entity":"product"}`),
		sqsMessage("bad-op", snsEnvelope(`{"entity":"product","id":"1","op":"upsert"}`)),
	}}
	// What fails for good is parked, whole, and acknowledged.
	if failed := batchFailures(t, fn, ev); len(failed) != 0 {
		t.Fatalf("batch item failures = %q, want none: the bad messages are parked", failed)
	}
	requireGone(t, c, key("raw"), key("sns"), key("eb"), key("a1"), key("a2"), "cache:explicit:"+ns)
	if n := missing(t, c, []string{"session:" + ns}); n != 0 {
		t.Fatal("a key outside the allowed ones was deleted")
	}
	p := parked(t, failures, 4)
	if ids := parkedIDs(p); !slices.Equal(ids, []string{"bad-op", "no-id", "not-json", "session"}) {
		t.Fatalf("parked %q, want the four bad messages", ids)
	}
	bodies := map[string]string{}
	for _, rec := range ev.Records {
		bodies[rec.MessageId] = rec.Body
	}
	for _, r := range p {
		if r.Content != failurequeue.Body || string(r.Data) != bodies[r.ID] || r.Reason == "" || r.Function != "sqs-invalidate" {
			t.Fatalf("parked %+v: want the message's body as it came, why, and by whom", r)
		}
	}

	// All good: the list is present and empty, which Lambda reads as success.
	out, err := fn.Invoke(t.Context(), lambdaevent.SQSEvent{Records: ev.Records[:1]})
	if err != nil || string(out) != `{"batchItemFailures":[]}` {
		t.Fatalf("all-good response = %s, %v", out, err)
	}
}

func TestSNSFunctionUnderTheEmulator(t *testing.T) {
	c := testenv.Cache(t)
	id := rand.Text()
	setKeys(t, c, "cache:product:"+id)
	failures, env := failureQueue(t)
	fn := emulator(t, "sns-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: env})
	record := func(msgID, message string) lambdaevent.SNSEvent {
		return lambdaevent.SNSEvent{Records: []events.SNSRecord{{
			SNS: events.SNSMessage{MessageID: msgID, Message: message, Timestamp: time.Now().UTC()},
		}}}
	}
	if out, err := fn.Invoke(t.Context(), record("good", `{"entity":"product","id":"`+id+`"}`)); err != nil || string(out) != "{}" {
		t.Fatalf("good record: %s, %v", out, err)
	}
	requireGone(t, c, "cache:product:"+id)
	if out, err := fn.Invoke(t.Context(), record("bad", `{"entity":"product","id":`)); err != nil || string(out) != "{}" {
		t.Fatalf("bad record: %s, %v; want it parked and the invoke done", out, err)
	}
	if p := parked(t, failures, 1); len(p) != 1 || p[0].ID != "bad" || p[0].Source != "sns" {
		t.Fatalf("parked %+v, want the bad message", p)
	}
}

func streamRecord(seq, name, id string, old, new events.Image) lambdaevent.DynamoDBEventRecord {
	return lambdaevent.DynamoDBEventRecord{
		EventID: "ev-" + seq, EventName: name, EventVersion: "1.1", EventSource: "aws:dynamodb", AWSRegion: "us-east-1",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/Products/stream/2026-11-29T12:00:00.000",
		Change: lambdaevent.DynamoDBStreamRecord{
			ApproximateCreationDateTime: time.Now().Unix(),
			Keys:                        events.Image{"id": attr(id)},
			OldImage:                    old, NewImage: new, SequenceNumber: seq, SizeBytes: 100, StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	}
}

func item(id, category string) events.Image {
	return events.Image{"id": attr(id), "category": attr(category)}
}

func attr(s string) events.AttributeValue {
	return events.AttributeValue{Type: events.TypeString, S: s}
}

func TestStreamFunctionUnderTheEmulator(t *testing.T) {
	c := testenv.Cache(t)
	ns := rand.Text()
	p1, p2, p3 := ns+"1", ns+"2", ns+"3"
	catA, catB, catC := "A"+ns, "B"+ns, "C"+ns
	setKeys(t, c, "cache:product:"+p1, "cache:product:"+p2, "cache:product:"+p3,
		"cache:category:"+catA, "cache:category:"+catB, "cache:category:"+catC)
	failures, env := failureQueue(t)
	fn := emulator(t, "stream-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: append(env, "INVALIDATION_RULES="+streamRules)})

	bad := streamRecord("300", "UPSERT", p1, nil, item(p1, catA))
	noCategory := streamRecord("400", "INSERT", ns+"4", nil, events.Image{"id": attr(ns + "4")})
	ev := lambdaevent.DynamoDBEvent{Records: []lambdaevent.DynamoDBEventRecord{
		streamRecord("100", "INSERT", p1, nil, item(p1, catA)),
		streamRecord("200", "MODIFY", p2, item(p2, catA), item(p2, catB)),
		bad,
		noCategory,
		streamRecord("500", "REMOVE", p3, item(p3, catC), nil),
	}}
	if failed := batchFailures(t, fn, ev); len(failed) != 0 {
		t.Fatalf("failed sequence numbers = %q, want none: the bad records are parked, so they never block the shard", failed)
	}
	if ids := parkedIDs(parked(t, failures, 2)); !slices.Equal(ids, []string{"300", "400"}) {
		t.Fatalf("parked %q, want 300 and 400", ids)
	}
	requireGone(t, c, "cache:product:"+p1, "cache:product:"+p2, "cache:product:"+p3,
		"cache:category:"+catA, "cache:category:"+catB, "cache:category:"+catC)
}

func TestStreamFunctionAnswersBeforeItsTimeout(t *testing.T) {
	cluster := testenv.StartCluster(t, "lambda-deadline", 7211)
	fn := emulator(t, "stream-invalidate", cluster.Config, rie.Options{Timeout: 3 * time.Second})
	var records []lambdaevent.DynamoDBEventRecord
	for i := range 30 {
		id := strconv.Itoa(i)
		records = append(records, streamRecord(strconv.Itoa(1000+i), "MODIFY", id, item(id, "x"), item(id, "x")))
	}
	// The first invoke initialises the function while the cluster is whole.
	if _, err := fn.Invoke(t.Context(), lambdaevent.DynamoDBEvent{Records: records[:1]}); err != nil {
		t.Fatal(err)
	}
	cluster.StopNode(t, cluster.Ports[2])
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	out, err := fn.Invoke(ctx, lambdaevent.DynamoDBEvent{Records: records})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("invoke with a node down: %v after %v (want a response, not a timeout)", err, took)
	}
	var resp lambdaevents.DynamoDBEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if n := len(resp.BatchItemFailures); n == 0 || n == len(records) || took > 3*time.Second {
		t.Fatalf("%d of %d records failed after %v: want those on the stopped node, within the 3 s timeout", n, len(records), took)
	}
}

// TestFunctionStartsWithoutTheCache: a bad setting stops the function
// before anything else, with one line saying why, and the invoke fails, to
// be retried; so does a password's secret that is not there. A cache that refuses the login, or cannot be reached, does
// not: the function answers that its records failed for now — beside the
// runtime's first request, or at init for environments made ahead — and
// says why once.
func TestFunctionStartsWithoutTheCache(t *testing.T) {
	testenv.Cache(t) // the stack is up: the wrong password is the only fault
	good := testenv.WorkerCacheConfig(t)
	badEndpoint, wrongPassword, nowhere, noSecret := good, good, good, good
	badEndpoint.Endpoint = "cache-without-a-port"
	wrongPassword.Password = "not-the-password"
	nowhere.Endpoint = "127.0.0.1:1"
	noSecret.Password, noSecret.PasswordSecret = "", &elasticache.PasswordSecret{ARN: missingSecretARN}
	for _, tc := range []struct {
		name   string
		cfg    elasticache.Config
		env    []string
		starts bool
		reason string
	}{
		{"bad setting", badEndpoint, nil, false, "CACHE_ENDPOINT"},
		{"no such secret", noSecret, nil, false, "CACHE_PASSWORD_SECRET_ARN=" + missingSecretARN},
		{"refused login", wrongPassword, nil, true, "WRONGPASS"},
		{"refused login at init", wrongPassword, []string{"AWS_LAMBDA_INITIALIZATION_TYPE=provisioned-concurrency"}, true, "WRONGPASS"},
		{"no cache", nowhere, nil, true, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out testenv.Log
			// Records that fail for now are retried until the deadline: a short one.
			fn := emulator(t, "sqs-invalidate", tc.cfg, rie.Options{Env: tc.env, Output: &out, Timeout: 3 * time.Second})
			resp, err := fn.Invoke(t.Context(), lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{sqsMessage("m1", `{"entity":"user","id":"1"}`)}})
			msg := `"msg":"cannot start"`
			if tc.starts {
				if err != nil || string(resp) != `{"batchItemFailures":[{"itemIdentifier":"m1"}]}` {
					t.Fatalf("invoke: %s, %v; want an answer with the record to retry", resp, err)
				}
				msg = `"msg":"cannot connect to the cache: records fail for now and are retried"`
			} else if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("invoke: %v; want it failed with the reason", err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if s := out.String(); strings.Contains(s, msg) && strings.Contains(s, tc.reason) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no line %s naming %s in the output:\n%s", msg, tc.reason, out.String())
				}
			}
		})
	}
}
