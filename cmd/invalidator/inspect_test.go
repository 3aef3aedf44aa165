package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// TestInspectConsumesOnlyItsOwnQueue: pointed at a queue of the worker's —
// by its variable, by the template's name for it, by its redrive policy,
// or as another's dead-letter queue — inspect refuses, exits non-zero and
// leaves every message where it was.
func TestInspectConsumesOnlyItsOwnQueue(t *testing.T) {
	testenv.Cache(t)
	c := awsenv.SQS(t)
	ns := strings.ToLower(rand.Text()[:10])
	create := func(name string, attrs map[string]string) (url, arn string) {
		t.Helper()
		q, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
		out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(q.QueueUrl), out.Attributes["QueueArn"]
	}
	failures, _ := create("test-inspect-"+ns+"-parked", nil)
	named, _ := create("test-"+ns+"-cache-invalidation-failures", nil)
	dlq, dlqARN := create("test-inspect-"+ns+"-dlq-of-another", nil)
	redriven, _ := create("test-inspect-"+ns+"-with-a-dlq", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":"5"}`})
	t.Setenv("FAILURE_QUEUE_URL", failures)
	for _, q := range []struct{ url, why string }{
		{failures, "FAILURE_QUEUE_URL"},
		{named, "cache-invalidation-failures"},
		{redriven, "dead-letter queue"},
		{dlq, "dead-letter queue"},
	} {
		for i := range 5 {
			body := `{"entity":"user","id":"` + strconv.Itoa(i) + `"}`
			if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(body)}); err != nil {
				t.Fatal(err)
			}
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"inspect", "--queue", q.url, "--for", "3s"}, &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), "refuse") || !strings.Contains(stderr.String(), q.why) {
			t.Errorf("%s: exit %d, stderr %q: want a refusal naming %q", q.url, code, stderr.String(), q.why)
		}
		// Every message is still there, visible: counted by body, since the
		// SDK may send one again after moto took it and its answer was lost
		// (CI's fifth run saw six).
		seen := map[string]bool{}
		for deadline := time.Now().Add(5 * time.Second); len(seen) < 5 && time.Now().Before(deadline); {
			out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				seen[aws.ToString(m.Body)] = true
			}
		}
		if len(seen) != 5 {
			t.Errorf("%s: %d of the 5 messages left", q.url, len(seen))
		}
	}
}
