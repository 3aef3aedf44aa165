package functions

import (
	"context"
	"crypto/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// queue is a queue with a DLQ made for one test, removed after it, so tests
// never see each other's messages.
type queue struct {
	URL, ARN, DLQ string
}

func newQueue(t *testing.T, visibility time.Duration, maxReceives int) queue {
	t.Helper()
	c := awsenv.SQS(t)
	name := "test-" + strings.ToLower(rand.Text()[:12])
	dlq := createQueue(t, c, name+"-dlq", nil)
	q := queue{DLQ: dlq}
	q.URL = createQueue(t, c, name, map[string]string{
		"VisibilityTimeout": strconv.Itoa(int(visibility / time.Second)),
		"RedrivePolicy":     `{"deadLetterTargetArn":"` + queueARN(t, c, dlq) + `","maxReceiveCount":"` + strconv.Itoa(maxReceives) + `"}`,
	})
	q.ARN = queueARN(t, c, q.URL)
	return q
}

func createQueue(t *testing.T, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return *out.QueueUrl
}

func queueARN(t *testing.T, c *sqs.Client, url string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// newTopic makes a topic delivering to the queues in SNS envelopes, removed
// after the test.
func newTopic(t *testing.T, queues ...queue) string {
	t.Helper()
	c := awsenv.SNS(t)
	topic, err := c.CreateTopic(t.Context(), &sns.CreateTopicInput{Name: aws.String("test-" + strings.ToLower(rand.Text()[:12]))})
	if err != nil {
		t.Fatal(err)
	}
	var subs []*string
	for _, q := range queues {
		sub, err := c.Subscribe(t.Context(), &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(q.ARN)})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub.SubscriptionArn)
	}
	// Unsubscribe before the queues go: moto fails publishes to a deleted queue.
	t.Cleanup(func() {
		ctx := context.Background()
		for _, sub := range subs {
			_, _ = c.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: sub})
		}
		_, _ = c.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: topic.TopicArn})
	})
	return *topic.TopicArn
}

// messages returns the messages in a queue, visible or in flight.
// messages counts the queue's visible and in-flight messages. moto counts
// the two in separate passes, so a message received or visible again
// between them is counted twice or not at all; such a count is rare and
// fleeting, so the count is read until two reads in a row agree.
func messages(t *testing.T, url string) int {
	t.Helper()
	last := -1
	for range 10 {
		out, err := awsenv.SQS(t).GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
				types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		})
		if err != nil {
			t.Fatal(err)
		}
		visible, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		inFlight, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		n := visible + inFlight
		if n == last {
			return n
		}
		last = n
	}
	return last
}

// inFlight counts the queue's messages received and not yet deleted or
// visible again: one pass of moto's, so exact at its instant.
func inFlight(t *testing.T, url string) int {
	t.Helper()
	out, err := awsenv.SQS(t).GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return n
}

// failureQueue makes a failure queue for one test and returns the
// environment that points the worker to it.
func failureQueue(t *testing.T) (url string, env []string) {
	t.Helper()
	url = createQueue(t, awsenv.SQS(t), "test-failures-"+strings.ToLower(rand.Text()[:12]), nil)
	return url, []string{"FAILURE_QUEUE_URL=" + url}
}

// parked receives the parked records of a failure queue, waiting until
// there are want of them or 20 s have passed: moto slows under the load of every test at once.
func parked(t *testing.T, url string, want int) []failurequeue.Record {
	t.Helper()
	var records []failurequeue.Record
	seen := map[string]bool{}
	for deadline := time.Now().Add(20 * time.Second); len(records) < want && time.Now().Before(deadline); {
		// Hidden 3 s only: a receive whose answer was lost on its way (the
		// SDK retries it) leaves its messages in flight that long, and
		// they are counted once by their IDs.
		out, err := awsenv.SQS(t).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 3, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			r, ok, err := failurequeue.Parse(aws.ToString(m.Body), queues.Strings(m.MessageAttributes))
			if !ok || err != nil {
				t.Fatalf("not a parked record (%v): %s", err, aws.ToString(m.Body))
			}
			// One parking sent twice (the SDK retrying a send whose answer
			// was lost, which moto had stored) is one: parked records are
			// replayed idempotently.
			once := string(r.Source) + "/" + r.ID + "/" + r.RequestID + "/" + r.ParkedAt.String()
			if seen[aws.ToString(m.MessageId)] || seen[once] {
				continue
			}
			seen[aws.ToString(m.MessageId)], seen[once] = true, true
			records = append(records, r)
		}
	}
	return records
}

// parkedIDs returns the record IDs of parked records, sorted.
func parkedIDs(records []failurequeue.Record) []string {
	var ids []string
	for _, r := range records {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// eventually polls cond every 100 ms until it holds or the time is up.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
	}
}
