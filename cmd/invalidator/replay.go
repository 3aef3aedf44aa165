package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/internal/frontend/replay"
	"github.com/invalidator-go/invalidator/invalidate"
)

func replayVerb(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queue := fs.String("queue", os.Getenv("FAILURE_QUEUE_URL"), "the queue to replay: the failure queue, a DLQ, or an old queue a stack left behind; never the worker's live queue or delay queue [FAILURE_QUEUE_URL]")
	endpoint := fs.String("cache-endpoint", os.Getenv("CACHE_ENDPOINT"), "host:port of the cache; the other CACHE_* variables as the worker reads them [CACHE_ENDPOINT]")
	rules := rulesFlag(fs)
	keep := fs.Bool("keep", false, "leave replayed messages in the queue")
	most := fs.Int("max", 0, "replay at most this many messages (default all)")
	asJSON := fs.Bool("json", false, "one JSON object per message on stdout, then a summary object")
	dryRun := fs.Bool("dry-run", false, "print what each message would invalidate, or why it would fail, and touch neither the cache nor the queue")
	waitFor := fs.Int("wait-for", 0, "read until this many messages were read, waiting up to --within for them: a record about to be parked")
	within := fs.Duration("within", 5*time.Second, "the longest --wait-for waits")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: invalidator replay [flags]

Reads every message of the queue and invalidates its changes with the worker's
rules: records the worker parked (as they came), the coordinates of stream records a
mapping gave up on (read again from the stream, which keeps them 24 h), SNS
invokes Lambda gave up on, and plain change messages (a DLQ's, an SNS
subscription's dead letters). A message whose keys are all deleted is deleted;
one that fails again stays, visible, and the exit status is 1. With
--dry-run it prints what each message would invalidate, or why it would fail,
and leaves every message in the queue, visible (exit status 0 once it read
them all).

It consumes the queue it reads: give it the failure queue (FAILURE_QUEUE_URL,
the default) or a DLQ (DLQ_URL), never the worker's live queue (QUEUE_URL) or
its delay queue (SECOND_DELETE_QUEUE_URL), whose messages are the worker's to
take; an old one a stack left behind, which nothing consumes any more, it may
drain (docs/deploy.md).

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *queue == "" {
		fmt.Fprintln(stderr, "invalidator replay: no queue: give --queue or FAILURE_QUEUE_URL")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	r, closeCache, err := replayer(ctx, *queue, *endpoint, *rules, *dryRun)
	if err != nil {
		fmt.Fprintln(stderr, "invalidator replay:", err)
		return 1
	}
	defer closeCache()
	r.Keep, r.Max, r.DryRun, r.WaitFor = *keep, *most, *dryRun, *waitFor
	began, read := time.Now(), ctx
	if *waitFor > 0 {
		var cancel context.CancelFunc
		read, cancel = context.WithTimeout(ctx, *within)
		defer cancel()
	}

	out := json.NewEncoder(stdout)
	last, seen, bad := time.Now(), 0, 0
	replayed, failed, err := r.Run(read, func(o replay.Outcome) {
		seen++
		if o.Error != "" {
			bad++
		}
		switch {
		case *asJSON:
			_ = out.Encode(o)
		case *dryRun:
			printPlanned(stdout, o)
		case o.Error != "":
			fmt.Fprintf(stdout, "FAIL %s %s %s: %s\n", o.MessageID, o.Kind, o.Source, o.Error)
		default:
			fmt.Fprintf(stdout, "ok   %s %s %s: %d record(s), %d key(s)\n", o.MessageID, o.Kind, o.Source, o.Records, o.Keys)
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "replay: %d messages so far, %d failed\n", seen, bad)
		}
	})
	if *asJSON {
		_ = out.Encode(map[string]int{"replayed": replayed, "failed": failed})
	}
	switch {
	case *waitFor > 0 && replayed < *waitFor:
		fmt.Fprintf(stderr, "replay: %d message(s) read of the %d waited for, in %.1f s\n", replayed, *waitFor, within.Seconds())
		return 1
	case *dryRun:
		fmt.Fprintf(stderr, "replay --dry-run: %d message(s) read in %.1f s, %d would pass, %d would fail again; nothing touched\n",
			replayed, time.Since(began).Seconds(), replayed-failed, failed)
	case failed > 0:
		fmt.Fprintf(stderr, "replay: %d message(s) read, %d done, %d failed again and left in %s\n", replayed, replayed-failed, failed, *queue)
	default:
		fmt.Fprintf(stderr, "replay: %d message(s) read and done\n", replayed)
	}
	if err != nil && !(*waitFor > 0 && read.Err() != nil && replayed >= *waitFor) {
		fmt.Fprintln(stderr, "invalidator replay:", err)
		return 1
	}
	if failed > 0 && !*dryRun {
		return 1
	}
	return 0
}

// replayer connects to the queue, the stream and the cache as the worker
// would from this environment; a dry run does without the cache.
func replayer(ctx context.Context, queue, endpoint, rules string, dryRun bool) (*replay.Replayer, func(), error) {
	w, err := settings(ctx, endpoint, rules)
	var cache invalidate.Cache
	closeCache := func() {}
	if err == nil && !dryRun {
		if w.cache, err = dial(w.aws, w.cfg.Cache); err == nil {
			cache, closeCache = invalidate.Valkey(w.cache), w.cache.Close
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return &replay.Replayer{
		SQS: sqs.NewFromConfig(w.aws), Streams: dynamodbstreams.NewFromConfig(w.aws), QueueURL: queue,
		Invalidator: invalidate.New(cache, invalidate.Options{Rules: w.cfg.Rules}),
	}, closeCache, nil
}

// printPlanned prints a dry run's outcome: what the message would
// invalidate, or why it would fail; a parked record says who parked it.
func printPlanned(w io.Writer, o replay.Outcome) {
	line := o.MessageID + " " + o.Kind
	if o.ParkedBy != "" {
		line += " by " + o.ParkedBy
	}
	if o.Source != "" {
		line += " (" + string(o.Source) + ")"
	}
	if o.Error != "" {
		fmt.Fprintf(w, "would FAIL %s: %s\n", line, shown(o.Error))
		return
	}
	line = fmt.Sprintf("would delete %s: %s", line, items(o.Planned.Keys))
	if len(o.Planned.Tags) > 0 {
		line += "; tags: " + items(o.Planned.Tags)
	}
	fmt.Fprintln(w, line)
}
