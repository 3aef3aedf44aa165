package own

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// attributes answers Check as SQS would for queues by name: those
// in redriven have a dead-letter queue, those in dlqs are one.
type attributes struct{ redriven, dlqs []string }

func (a attributes) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	out := &sqs.GetQueueAttributesOutput{Attributes: map[string]string{}}
	for _, q := range a.redriven {
		if strings.HasSuffix(*in.QueueUrl, "/"+q) {
			out.Attributes["RedrivePolicy"] = `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:dlq","maxReceiveCount":5}`
		}
	}
	return out, nil
}

func (a attributes) ListDeadLetterSourceQueues(_ context.Context, in *sqs.ListDeadLetterSourceQueuesInput, _ ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error) {
	out := &sqs.ListDeadLetterSourceQueuesOutput{}
	for _, q := range a.dlqs {
		if strings.HasSuffix(*in.QueueUrl, "/"+q) {
			out.QueueUrls = []string{"https://sqs.us-east-1.amazonaws.com/1/source"}
		}
	}
	return out, nil
}

// TestCheckQueue: inspect refuses every queue of the worker's; replay
// the live ones — by variable, whatever the host and a trailing slash, by
// the local stack's and CloudFormation's names, by a redrive policy — and
// of a queue left behind only those the variables name.
func TestCheckQueue(t *testing.T) {
	const at = "https://sqs.us-east-1.amazonaws.com/123456789012/"
	env := map[string]string{"QUEUE_URL": "http://127.0.0.1:4566/123456789012/live/", "FAILURE_QUEUE_URL": at + "parked",
		"FAILOVER_WINDOW_QUEUE_URL": at + "slot-1," + at + "slot-2"}
	client := attributes{redriven: []string{"with-a-dlq", "stack-Queue-OLD", "stack-FailoverWindowQueueX-A1B2"}, dlqs: []string{"a-dlq"}}
	for _, c := range []struct {
		queue string
		// why each of RefuseAll, RefuseLive, RefuseLiveByVariable
		// refuses it; "" where it does not.
		why [3]string
	}{
		{"live", [3]string{"QUEUE_URL", "QUEUE_URL", "QUEUE_URL"}},
		{"parked", [3]string{"FAILURE_QUEUE_URL", "", ""}},
		{"dev-cache-invalidation", [3]string{"ends in cache-invalidation", "ends in cache-invalidation", ""}},
		{"dev-cache-invalidation-again", [3]string{"cache-invalidation-again", "cache-invalidation-again", ""}},
		{"dev-cache-invalidation-window", [3]string{"cache-invalidation-window", "cache-invalidation-window", ""}},
		{"dev-cache-invalidation-window-3", [3]string{"cache-invalidation-window", "cache-invalidation-window", ""}},
		{"slot-2", [3]string{"FAILOVER_WINDOW_QUEUE_URL", "FAILOVER_WINDOW_QUEUE_URL", "FAILOVER_WINDOW_QUEUE_URL"}},
		{"stack-FailoverWindowQueue4-A1B2", [3]string{"-FailoverWindowQueue-", "-FailoverWindowQueue-", ""}},
		{"stack-FailoverWindowQueueX-A1B2", [3]string{"RedrivePolicy", "RedrivePolicy", ""}},
		{"cache-invalidation-raw", [3]string{"cache-invalidation-raw", "cache-invalidation-raw", ""}},
		{"dev-cache-invalidation-failures", [3]string{"cache-invalidation-failures", "", ""}},
		{"stack-SecondDeleteQueue-A1B2", [3]string{"-SecondDeleteQueue-", "-SecondDeleteQueue-", ""}},
		{"stack-FailoverWindowQueue-A1B2", [3]string{"-FailoverWindowQueue-", "-FailoverWindowQueue-", ""}},
		{"stack-DeadLetterQueue-A1B2", [3]string{"-DeadLetterQueue-", "", ""}},
		{"stack-FailureQueue-A1B2", [3]string{"-FailureQueue-", "", ""}},
		{"stack-Queue-OLD", [3]string{"-Queue-", "-Queue-", ""}},
		{"with-a-dlq", [3]string{"RedrivePolicy", "RedrivePolicy", ""}},
		{"a-dlq", [3]string{"dead-letter queue of", "", ""}},
		{"cache-invalidation-inspect", [3]string{"", "", ""}},
	} {
		for refuse, why := range c.why {
			err := Check(t.Context(), client, at+c.queue, func(k string) string { return env[k] }, Refuse(refuse))
			if (err != nil) != (why != "") || (err != nil && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), why))) {
				t.Errorf("%s, Refuse %d: %v; want a refusal naming %q", c.queue, refuse, err, why)
			}
		}
	}
}
