package inspect

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// WorkerQueueNames are the names the local stack gives the queues of the
// worker and of its failure path: the queue, its DLQ, the failure queue
// and the delay queue of second deletes.
var WorkerQueueNames = []string{"cache-invalidation", "cache-invalidation-dlq", "cache-invalidation-failures", "cache-invalidation-again"}

// WorkerQueueIDs are template.yaml's logical IDs of the same queues, which
// CloudFormation puts in the names it makes them: <stack>-<ID>-<suffix>.
var WorkerQueueIDs = []string{"Queue", "DeadLetterQueue", "FailureQueue", "SecondDeleteQueue"}

// errNotOwnQueue refuses a queue that is not the inspector's own.
var errNotOwnQueue = errors.New("refused: inspect deletes what it reads, so it consumes only a queue of its own, subscribed to the topic (INSPECT_QUEUE_URL; the template's cache-invalidation-inspect)")

// QueueAttributes is what CheckOwn needs of SQS; *sqs.Client has it.
type QueueAttributes interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, opts ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

// CheckOwn returns an error wrapping errNotOwnQueue when queueURL may be
// one of the worker's queues: one of workers (the worker's queues as
// configured, by variable), one named as the local stack or CloudFormation
// names them, one with a dead-letter queue (the worker's queue and delay queue have one;
// an inspector's needs none), or one that is a dead-letter queue (the DLQ,
// the failure queue). A queue whose attributes cannot be read is refused
// too.
func CheckOwn(ctx context.Context, client QueueAttributes, queueURL string, workers map[string]string) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("--queue %s: %s: %w", queueURL, fmt.Sprintf(format, args...), errNotOwnQueue)
	}
	for _, name := range slices.Sorted(maps.Keys(workers)) {
		if u := workers[name]; u != "" && queuePath(u) == queuePath(queueURL) {
			return refuse("it is %s", name)
		}
	}
	queue := path.Base(queuePath(queueURL))
	for _, name := range WorkerQueueNames {
		if strings.HasSuffix(queue, name) {
			return refuse("its name ends in %s, as the local stack names a queue of the worker's", name)
		}
	}
	for _, id := range WorkerQueueIDs {
		if strings.Contains(queue, "-"+id+"-") {
			return refuse("its name holds -%s-, as CloudFormation names template.yaml's %s, a queue of the worker's", id, id)
		}
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return refuse("cannot tell whether it is a queue of the worker's (allow sqs:GetQueueAttributes): %v", err)
	}
	if attrs.Attributes[string(types.QueueAttributeNameRedrivePolicy)] != "" {
		return refuse("it has a dead-letter queue (RedrivePolicy), as the worker's queue and delay queue do")
	}
	sources, err := client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(queueURL), MaxResults: aws.Int32(1)})
	if err != nil {
		return refuse("cannot tell whether it is a queue of the worker's (allow sqs:ListDeadLetterSourceQueues): %v", err)
	}
	if len(sources.QueueUrls) > 0 {
		return refuse("it is the dead-letter queue of %s, as the worker's DLQ and failure queue are", sources.QueueUrls[0])
	}
	return nil
}

// queuePath is what names a queue in its URL, /ACCOUNT/NAME: SQS finds a
// queue by it, whatever the host.
func queuePath(queueURL string) string {
	if u, err := url.Parse(queueURL); err == nil && u.Path != "" {
		return strings.TrimSuffix(u.Path, "/")
	}
	return queueURL
}
