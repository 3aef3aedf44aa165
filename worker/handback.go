package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Queues is what the SQS function needs of SQS to hand messages back to
// their queue; *sqs.Client has it.
type Queues interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// RetryAfter is how long a message that failed for now stays hidden before
// it comes back, after its receives-th receive: 1 s, doubled at each
// receive up to maxRetryAfter, less up to a quarter of jitter so that
// messages failed together do not all come back together. Short, so that
// the backlog of an outage comes back within seconds of its end; capped
// low, so it does — which takes a queue's maxReceiveCount of 1,000 (the
// template's) to outlast more than an hour of outage: about 80 minutes.
// Not wait.Backoff: its equal jitter, down to half the step, would bring
// the least of those 1,000 receives under an hour.
func RetryAfter(receives int) time.Duration {
	d := min(time.Second<<min(max(receives, 1)-1, 6), maxRetryAfter)
	return d - rand.N(d/4+1)
}

// maxRetryAfter is the longest RetryAfter.
const maxRetryAfter = 5 * time.Second

// handBack makes the messages that failed for now visible again after
// RetryAfter, instead of after the queue's visibility timeout (six times
// the function's timeout). Should it fail, they come back all the same,
// only later.
func (w *Worker) handBack(ctx context.Context, o Outcome, records []record) {
	if w.opts.Queues == nil {
		return
	}
	byQueue := map[string][]types.ChangeMessageVisibilityBatchRequestEntry{}
	most, n := 0, 0
	for i := range o.Records {
		d := records[i].delivery
		if o.Records[i].Fate != Retry || d.Receipt.Handle == "" {
			continue // done, or not from Lambda's SQS event source: nothing to hand back
		}
		n++
		most = max(most, d.Receipt.Receives)
		byQueue[d.From] = append(byQueue[d.From], types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(d.Receipt.Handle),
			VisibilityTimeout: int32(RetryAfter(d.Receipt.Receives).Round(time.Second) / time.Second),
		})
	}
	if most > 0 {
		LogHandBack(ctx, w.opts.Logger, n, most)
	}
	for arn, entries := range byQueue {
		url, ok := queueURL(arn)
		if !ok {
			w.opts.Logger.WarnContext(ctx, "cannot hand messages back: no queue ARN; they come back after the queue's visibility timeout", "messages", len(entries), "arn", arn)
			continue
		}
		for start := 0; start < len(entries); start += 10 { // SQS's most per batch
			chunk := entries[start:min(start+10, len(entries))]
			out, err := w.opts.Queues.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: chunk})
			if err == nil && len(out.Failed) > 0 {
				err = errors.New(aws.ToString(out.Failed[0].Message))
			}
			if err != nil {
				w.opts.Logger.WarnContext(ctx, "cannot hand messages back: they come back after the queue's visibility timeout", "messages", len(chunk), "error", err.Error())
			}
		}
	}
}

// queueURL is the URL of the queue arn names
// (arn:PARTITION:sqs:REGION:ACCOUNT:NAME). SQS finds a queue by the path of
// its URL, so the host only has to be one of SQS's.
func queueURL(arn string) (string, bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return "", false
	}
	domain := "amazonaws.com"
	if parts[1] == "aws-cn" {
		domain = "amazonaws.com.cn"
	}
	return "https://sqs." + parts[3] + "." + domain + "/" + parts[4] + "/" + parts[5], true
}

// LogHandBack writes the line of messages handed back to their queue, with
// the most receives one of them has had: how near the DLQ they are
// (maxReceiveCount).
func LogHandBack(ctx context.Context, log *slog.Logger, messages, receives int) {
	log.InfoContext(ctx, "messages handed back", "messages", messages, "max_receives", receives)
}
