package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// probeResult is how long a path took to invalidate a fresh change sent
// right after a fault ended.
type probeResult struct {
	path string
	took time.Duration
	err  error
}

// probe sends a fresh change down each path at once, and times each until
// its key is gone.
func (l *load) probe(ctx context.Context, fault string) []probeResult {
	n := strconv.FormatInt(l.probes.Add(1), 10)
	paths := map[string]struct {
		key  string
		send func(ctx context.Context) error
	}{
		pathStream: {"cache:product:probe-" + n, func(ctx context.Context) error { return l.putProduct(ctx, "probe-"+n, 1, true) }},
		pathPoller: {"cache:probe:poller-" + n, func(ctx context.Context) error { return l.send(ctx, l.env.queueURL, "poller-"+n) }},
		pathSQS:    {"cache:probe:sqs-" + n, func(ctx context.Context) error { return l.send(ctx, l.env.rawQueue, "sqs-"+n) }},
		pathCDC:    {"cache:order:probe-" + n, func(ctx context.Context) error { return l.env.sql(ctx, upsertOrder("probe-"+n, 1)) }},
	}
	results := make(chan probeResult, len(paths))
	for path, p := range paths {
		go func() {
			r := probeResult{path: path}
			r.took, r.err = l.timeInvalidation(ctx, p.key, p.send)
			results <- r
		}()
	}
	var out []probeResult
	for range paths {
		out = append(out, <-results)
	}
	return out
}

func (l *load) send(ctx context.Context, queue, id string) error {
	_, err := l.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(`{"entity":"probe","id":"` + id + `"}`)})
	return err
}

// timeInvalidation caches key, sends a change that invalidates it, and
// returns how long the key took to go, up to 30 s.
func (l *load) timeInvalidation(ctx context.Context, key string, send func(context.Context) error) (time.Duration, error) {
	for deadline := time.Now().Add(10 * time.Second); ; wait.For(ctx, 50*time.Millisecond) {
		err := l.cache.Do(ctx, l.cache.B().Set().Key(key).Value("cached").Ex(time.Hour).Build()).Error()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("cannot cache the probe key: %w", err)
		}
	}
	start := time.Now()
	if err := send(ctx); err != nil {
		return 0, err
	}
	for time.Since(start) < 30*time.Second && ctx.Err() == nil {
		if n, err := l.cache.Do(ctx, l.cache.B().Exists().Key(key).Build()).AsInt64(); err == nil && n == 0 {
			return time.Since(start), nil
		}
		wait.For(ctx, 20*time.Millisecond)
	}
	return time.Since(start), errors.New("not invalidated within 30 s")
}

// raceDrain bounds the drain of a race or a failover.
const raceDrain = 2 * time.Minute

// drain waits until the queues are empty, second deletes included, and a
// change sent through the stream last is invalidated — the stream is done
// with all before it —, and one through the commit log; then until the
// second deletes those changes brought are done too.
//
// It returns how long it took. The workers, stopped, hand back what they
// received and had not started, so that a drain after a restart takes
// seconds; raceDrain leaves room for a message a killed worker left hidden
// for the queues' 60 s visibility timeout.
func (l *load) drain(ctx context.Context, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	deadline := start.Add(limit)
	empty := func() bool {
		for _, q := range []string{l.env.queueURL, l.env.rawQueue, l.env.againQueue} {
			for l.messages(ctx, q) != 0 {
				if time.Now().After(deadline) || ctx.Err() != nil {
					return false
				}
				wait.For(ctx, 500*time.Millisecond)
			}
		}
		return true
	}
	if !empty() {
		return time.Since(start), false
	}
	_, err := l.timeInvalidation(ctx, "cache:product:drained", func(ctx context.Context) error { return l.putProduct(ctx, "drained", 1, true) })
	if err == nil {
		_, err = l.timeInvalidation(ctx, "cache:order:drained", func(ctx context.Context) error { return l.env.sql(ctx, upsertOrder("drained", 1)) })
	}
	wait.For(ctx, time.Second) // for the function to send the second delete after its first
	ok := err == nil && empty()
	return time.Since(start), ok
}

// messages counts a queue's messages, visible, in flight or delayed,
// reading until two reads agree: moto counts the kinds in separate passes.
func (l *load) messages(ctx context.Context, queue string) int {
	last := -1
	for range 10 {
		out, err := l.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			return -1
		}
		visible, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		hidden, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		delayed, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)])
		if n := visible + hidden + delayed; n == last {
			return n
		} else {
			last = n
		}
	}
	return last
}
