package worker

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// retryAfter is how long a message that failed for now stays hidden before
// it comes back, after its receives-th receive: 1 s, doubled at each
// receive up to maxRetryAfter, less up to a quarter of jitter so that
// messages failed together do not all come back together. Short, so that
// the backlog of an outage comes back within seconds of its end; capped
// low, so it does — which takes a queue's maxReceiveCount of 1,000 (the
// template's) to outlast more than an hour of outage: about 80 minutes.
// Not wait.Backoff: its equal jitter, down to half the step, would bring
// the least of those 1,000 receives under an hour.
func retryAfter(receives int) time.Duration {
	d := min(time.Second<<min(max(receives, 1)-1, 6), maxRetryAfter)
	return d - rand.N(d/4+1)
}

// maxRetryAfter is the longest retryAfter.
const maxRetryAfter = 5 * time.Second

// handBack makes the messages that failed for now visible again after
// retryAfter, instead of after the queue's visibility timeout (six times
// the function's timeout). Should it fail, they come back all the same,
// only later.
func (w *Worker) handBack(ctx context.Context, o Outcome, delivered func(int) (events.Delivery, []byte)) {
	if w.opts.Queues == nil {
		return
	}
	byQueue := map[string][]queues.Return{}
	most, n := 0, 0
	for i := range o.Records {
		if o.Records[i].Fate != Retry {
			continue
		}
		d, _ := delivered(i)
		if d.Receipt.Handle == "" {
			continue // not received from a queue: nothing to hand back
		}
		n++
		most = max(most, d.Receipt.Receives)
		byQueue[d.From] = append(byQueue[d.From], queues.Return{Handle: d.Receipt.Handle, After: retryAfter(d.Receipt.Receives)})
	}
	if most > 0 {
		// How near the DLQ they are: maxReceiveCount.
		w.opts.Logger.InfoContext(ctx, "messages handed back", "messages", n, "max_receives", most)
	}
	for arn, msgs := range byQueue {
		url, ok := queueURL(arn)
		if !ok {
			w.opts.Logger.WarnContext(ctx, "cannot hand messages back: no queue ARN; they come back after the queue's visibility timeout", "messages", len(msgs), "arn", arn)
			continue
		}
		if err := queues.HandBack(ctx, w.opts.Queues, url, msgs); err != nil {
			w.opts.Logger.WarnContext(ctx, "cannot hand messages back: they come back after the queue's visibility timeout", "messages", len(msgs), "error", err.Error())
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
