package own

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Queue is a queue of the worker or of its failure path, by each of
// the names it goes by.
type Queue struct {
	// Var is the variable that holds its URL.
	Var string
	// Name is the local stack's name for it (localstack/env.sh).
	Name string
	// ID is its logical ID in template.yaml, which CloudFormation puts in
	// the name it makes: <stack>-<ID>-<suffix>. None for the raw queue,
	// the local stack's alone.
	ID string
	// Live says that the worker takes its messages; the others hold what
	// it failed, for invalidator replay.
	Live bool
	// Slots says it is several queues, its variable their URLs
	// comma-separated, the others named as the first with their number
	// after it: cache-invalidation-window-2, -FailoverWindowQueue2-.
	Slots bool
}

// Queues are the queues of the worker and of its failure path.
var Queues = []Queue{
	{Var: "QUEUE_URL", Name: "cache-invalidation", ID: "Queue", Live: true},
	{Var: "RAW_QUEUE_URL", Name: "cache-invalidation-raw", Live: true},
	{Var: "FAILOVER_WINDOW_QUEUE_URL", Name: "cache-invalidation-window", ID: "FailoverWindowQueue", Live: true, Slots: true},
	{Var: "SECOND_DELETE_QUEUE_URL", Name: "cache-invalidation-again", ID: "SecondDeleteQueue", Live: true},
	{Var: "DLQ_URL", Name: "cache-invalidation-dlq", ID: "DeadLetterQueue"},
	{Var: "FAILURE_QUEUE_URL", Name: "cache-invalidation-failures", ID: "FailureQueue"},
}

// Refuse is which of the worker's queues Check refuses, and by what.
type Refuse int

const (
	// RefuseAll refuses every queue of the worker's, by its
	// variable or its name, and a queue with a dead-letter queue (as the
	// queue and the delay queue have) or that is one (the DLQ, the failure
	// queue): inspect's, which consumes only copies of its own.
	RefuseAll Refuse = iota
	// RefuseLive refuses the queues the worker takes from, by their
	// variables or names, and a queue with a dead-letter queue: replay's,
	// whose inputs are the failure queue and DLQs.
	RefuseLive
	// RefuseLiveByVariable refuses the live queues by their variables
	// alone: replay's, of a queue a stack left behind, which nothing
	// consumes any more though it bears a live queue's name and
	// dead-letter queue.
	RefuseLiveByVariable
)

// ErrRefused refuses a queue whose messages are the worker's.
var ErrRefused = errors.New("refused: a queue of the worker's")

// Attributes is what Check needs of SQS; *sqs.Client has it.
type Attributes interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, opts ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

// Check returns an error wrapping ErrRefused when a consumer that
// deletes what it reads must leave queueURL to the worker: one of
// Queues that refuse names, by its variable (read with getenv) or by
// its name, or by its redrive attributes. A queue whose attributes it must
// and cannot read is refused too.
func Check(ctx context.Context, client Attributes, queueURL string, getenv func(string) string, refuse Refuse) error {
	refused := func(format string, args ...any) error {
		return fmt.Errorf("--queue %s: %s: %w", queueURL, fmt.Sprintf(format, args...), ErrRefused)
	}
	queue := path.Base(queuePath(queueURL))
	for _, q := range Queues {
		if refuse != RefuseAll && !q.Live {
			continue
		}
		for u := range strings.SplitSeq(getenv(q.Var), ",") {
			if u != "" && queuePath(u) == queuePath(queueURL) {
				return refused("it is %s", q.Var)
			}
		}
		if refuse == RefuseLiveByVariable {
			continue
		}
		if strings.HasSuffix(queue, q.Name) || q.Slots && strings.HasSuffix(strings.TrimRight(queue, "0123456789"), q.Name+"-") {
			return refused("its name ends in %s, as the local stack names %s", q.Name, q.Var)
		}
		if q.ID != "" && (strings.Contains(queue, "-"+q.ID+"-") || q.Slots && slotOf(queue, q.ID)) {
			return refused("its name holds -%s-, as CloudFormation names template.yaml's %s (%s)", q.ID, q.ID, q.Var)
		}
	}
	if refuse == RefuseLiveByVariable {
		return nil
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return refused("cannot tell whether it is a queue of the worker's (allow sqs:GetQueueAttributes): %v", err)
	}
	if attrs.Attributes[string(types.QueueAttributeNameRedrivePolicy)] != "" {
		return refused("it has a dead-letter queue (RedrivePolicy), as the worker's queue and delay queue do")
	}
	if refuse != RefuseAll {
		return nil
	}
	sources, err := client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(queueURL), MaxResults: aws.Int32(1)})
	if err != nil {
		return refused("cannot tell whether it is a queue of the worker's (allow sqs:ListDeadLetterSourceQueues): %v", err)
	}
	if len(sources.QueueUrls) > 0 {
		return refused("it is the dead-letter queue of %s, as the worker's DLQ and failure queue are", sources.QueueUrls[0])
	}
	return nil
}

// slotOf says whether name holds -ID, a number, and a dash: a slot of
// the queue after the first, as CloudFormation names it.
func slotOf(name, id string) bool {
	for _, rest := range strings.Split(name, "-"+id)[1:] {
		if digits := len(rest) - len(strings.TrimLeft(rest, "0123456789")); digits > 0 && strings.HasPrefix(rest[digits:], "-") {
			return true
		}
	}
	return false
}

// queuePath is what names a queue in its URL, /ACCOUNT/NAME: SQS finds a
// queue by it, whatever the host.
func queuePath(queueURL string) string {
	if u, err := url.Parse(queueURL); err == nil && u.Path != "" {
		return strings.TrimSuffix(u.Path, "/")
	}
	return queueURL
}
