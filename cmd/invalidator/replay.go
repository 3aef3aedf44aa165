package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/cmd/invalidator/internal/replay"
	"github.com/invalidator-go/invalidator/internal/own"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/worker"
)

func replayVerb(args []string, stdout, stderr io.Writer) int {
	var rp replaying
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&rp.queue, "queue", os.Getenv("FAILURE_QUEUE_URL"), "the queue to replay: the failure queue, a DLQ, or with --left-behind an old queue a stack left behind; never a queue the worker takes from [FAILURE_QUEUE_URL]")
	fs.StringVar(&rp.endpoint, "cache-endpoint", os.Getenv("CACHE_ENDPOINT"), "host:port of the cache; the other CACHE_* variables as the worker reads them [CACHE_ENDPOINT]")
	rules := rulesFlag(fs)
	fs.BoolVar(&rp.defaultRules, "default-rules", false, "plan with the default rules, cache:{entity}:{id}, knowing them the worker's: without rules replay refuses to start")
	fs.BoolVar(&rp.leftBehind, "left-behind", false, "--queue is an old queue a stack left behind, which nothing consumes any more (docs/deploy.md): refused then only as QUEUE_URL, RAW_QUEUE_URL, FAILOVER_WINDOW_QUEUE_URL or SECOND_DELETE_QUEUE_URL")
	ecpu := fs.Float64("ecpu-per-second", 0, "the most ECPUs a second replay asks of the cache, 0 for no limit (default the worker's: CACHE_WORKER_ECPU_SHARE percent of CACHE_MAX_ECPU_PER_SECOND)")
	fs.StringVar(&rp.s3, "s3", os.Getenv("FAILED_BATCH_S3_URI"), "s3://BUCKET/PREFIX: replay the objects there instead of a queue, the stream batches a mapping's S3 on-failure destination kept whole (template parameter FailedBatchBucketArn; PREFIX aws/lambda/ for all); left in place unless --delete [FAILED_BATCH_S3_URI]")
	fs.BoolVar(&rp.delete, "delete", false, "with --s3, delete each object whose keys are all deleted")
	keep := fs.Bool("keep", false, "leave replayed messages in the queue")
	most := fs.Int("max", 0, "replay at most this many messages (default all)")
	asJSON := fs.Bool("json", false, "one JSON object per message on stdout, then a summary object")
	fs.BoolVar(&rp.dryRun, "dry-run", false, "print what each message would invalidate, or why it would fail, and touch neither the cache nor the queue")
	waitFor := fs.Int("wait-for", 0, "read until this many messages were read, waiting up to --within for them: a record about to be parked")
	within := fs.Duration("within", 5*time.Second, "the longest --wait-for waits")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: invalidator replay [flags]

Reads every message of the queue and invalidates its changes as the worker
would: with its rules, within its ECPU budget, each key's second delete and
failover re-delete scheduled. It takes records the worker parked (as they
came), the coordinates of stream records a mapping gave up on (read again
from the DynamoDB or Kinesis stream, which keeps them 24 h by default), SNS
invokes Lambda gave up on, and
plain change messages (a DLQ's, an SNS subscription's dead letters). A
message whose keys are all deleted is deleted; one that fails again stays,
visible, and the exit status is 1. With --s3 it reads the objects a stream
mapping's S3 on-failure destination wrote instead, each a batch with its
records, and leaves them in place unless --delete. With --dry-run it prints what each
message would invalidate, or why it would fail, and leaves every message in
the queue, visible (exit status 0 once it read them all).

It reads nothing and exits 2 without the worker's rules (--rules,
INVALIDATION_RULES; --default-rules to plan cache:{entity}:{id}), and on a
queue the worker takes from, whose messages it would consume: give it the
failure queue (FAILURE_QUEUE_URL, the default) or a DLQ (DLQ_URL). It
refuses QUEUE_URL, RAW_QUEUE_URL, FAILOVER_WINDOW_QUEUE_URL and
SECOND_DELETE_QUEUE_URL, a queue named as those are (the local stack's
cache-invalidation, -raw, -window, -again; CloudFormation's <stack>-Queue-,
-FailoverWindowQueue-, -SecondDeleteQueue-...) and one with a dead-letter
queue. An old queue a stack left behind, which nothing consumes any more,
it drains with --left-behind (docs/deploy.md).

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	rp.rules = *rules
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "ecpu-per-second" {
			rp.ecpu = ecpu
		}
	})
	if problem := rp.check(fs); problem != "" {
		fmt.Fprintln(stderr, "invalidator replay:", problem)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	r, closeCache, err := rp.replayer(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "invalidator replay:", err)
		if errors.Is(err, own.ErrRefused) {
			return 2
		}
		return 1
	}
	defer closeCache()
	r.Keep, r.Max, r.DryRun, r.WaitFor = *keep || rp.s3 != "" && !rp.delete, *most, rp.dryRun, *waitFor
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
		case rp.dryRun:
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
	case rp.dryRun:
		fmt.Fprintf(stderr, "replay --dry-run: %d message(s) read in %.1f s, %d would pass, %d would fail again; nothing touched\n",
			replayed, time.Since(began).Seconds(), replayed-failed, failed)
	case failed > 0:
		fmt.Fprintf(stderr, "replay: %d message(s) read, %d done, %d failed again and left in %s\n", replayed, replayed-failed, failed, cmp.Or(rp.s3, rp.queue))
	default:
		fmt.Fprintf(stderr, "replay: %d message(s) read and done\n", replayed)
	}
	if err != nil && !(*waitFor > 0 && read.Err() != nil && replayed >= *waitFor) {
		fmt.Fprintln(stderr, "invalidator replay:", err)
		return 1
	}
	if failed > 0 && !rp.dryRun {
		return 1
	}
	return 0
}

// replaying is what replay's flags ask for.
type replaying struct {
	queue, s3, endpoint, rules string
	defaultRules, leftBehind   bool
	dryRun, delete             bool
	// ecpu is --ecpu-per-second when given; nil for the worker's budget.
	ecpu *float64
}

// check returns what is wrong with the flags, if anything: unlike inspect,
// replay deletes what it reads, so it never guesses the rules.
func (rp *replaying) check(fs *flag.FlagSet) string {
	switch {
	case fs.NArg() > 0:
		return fmt.Sprintf("unexpected argument %q: everything is a flag", fs.Arg(0))
	case rp.queue == "" && rp.s3 == "":
		return "no queue: give --queue or FAILURE_QUEUE_URL, or --s3 for a bucket's failed batches"
	case rp.s3 != "" && !strings.HasPrefix(rp.s3, "s3://") || rp.s3 != "" && rp.bucket() == "":
		return "--s3: want s3://BUCKET/PREFIX"
	case rp.delete && rp.s3 == "":
		return "--delete is for --s3's objects: a queue's replayed messages are deleted unless --keep"
	case !rulesGiven(rp.rules) && !rp.defaultRules:
		return "no rules: give the worker's (--rules, INVALIDATION_RULES_FILE or INVALIDATION_RULES), or --default-rules to plan cache:{entity}:{id}; nothing was read"
	case rulesGiven(rp.rules) && rp.defaultRules:
		return "--default-rules, and the rules of --rules or INVALIDATION_RULES: give one"
	case rp.ecpu != nil && (!(*rp.ecpu >= 0) || math.IsInf(*rp.ecpu, 1)):
		return "--ecpu-per-second: want ECPUs a second, or 0 for no limit"
	}
	return ""
}

// bucket and prefix are --s3's.
func (rp *replaying) bucket() string {
	bucket, _, _ := strings.Cut(strings.TrimPrefix(rp.s3, "s3://"), "/")
	return bucket
}

func (rp *replaying) prefix() string {
	_, prefix, _ := strings.Cut(strings.TrimPrefix(rp.s3, "s3://"), "/")
	return prefix
}

// refused is the queues replay leaves to the worker.
func (rp *replaying) refused() own.Refuse {
	if rp.leftBehind {
		return own.RefuseLiveByVariable
	}
	return own.RefuseLive
}

// replayer refuses a queue of the worker's, then connects to the queue,
// the stream and the cache as the worker would from this environment, and
// deletes as it does: within its budget, scheduling what it deletes to be
// deleted again. A dry run does without the cache.
func (rp *replaying) replayer(ctx context.Context, stderr io.Writer) (*replay.Replayer, func(), error) {
	w, err := settings(ctx, rp.endpoint, rp.rules)
	if err != nil {
		return nil, nil, err
	}
	client := sqs.NewFromConfig(w.aws)
	if rp.s3 == "" {
		if err := own.Check(ctx, client, rp.queue, os.Getenv, rp.refused()); err != nil {
			return nil, nil, fmt.Errorf("%w; replay consumes what it reads: give it the failure queue, a DLQ, or an old queue a stack left behind that no variable names (--left-behind)", err)
		}
	}
	var cache invalidate.Cache
	closeCache := func() {}
	if !rp.dryRun {
		if w.cache, err = dial(w.aws, w.cfg.Cache); err != nil {
			return nil, nil, err
		}
		cache, closeCache = invalidate.Valkey(w.cache), w.cache.Close
	}
	iopts := invalidate.Options{Rules: w.cfg.Rules, ECPUPerSecond: w.cfg.ECPUPerSecond}
	if rp.ecpu != nil {
		iopts.ECPUPerSecond = *rp.ecpu
	}
	if w.cache != nil && iopts.ECPUPerSecond > 0 && w.cfg.MaxProcesses > 0 { // the fleet's budget, shared with the worker's processes
		iopts.Fleet, iopts.FallbackECPUPerSecond = invalidate.ValkeyBudget(w.cache, iopts.ECPUPerSecond), iopts.ECPUPerSecond/float64(w.cfg.MaxProcesses)
		iopts.OnFleetDown = func(err error) {
			if err != nil {
				fmt.Fprintf(stderr, "replay: the fleet's ECPU budget cannot be read (%v): at most %g ECPUs a second until it can\n", err, iopts.FallbackECPUPerSecond)
			}
		}
	}
	again, window := w.cfg.Again(client)
	// Its failures are replay's output, not the worker's logs and metrics.
	opts := worker.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, SecondDelete: again, Window: window}
	r := &replay.Replayer{SQS: client, Streams: dynamodbstreams.NewFromConfig(w.aws), Kinesis: kinesis.NewFromConfig(w.aws), QueueURL: rp.queue,
		Worker: worker.New(invalidate.New(cache, iopts), opts),
	}
	if rp.s3 != "" {
		r.Bucket, r.Prefix = rp.bucket(), rp.prefix()
		// An endpoint of one's own (LocalStack, moto) answers path-style
		// requests, not a bucket's own host name.
		r.S3 = s3.NewFromConfig(w.aws, func(o *s3.Options) { o.UsePathStyle = w.aws.BaseEndpoint != nil })
	}
	return r, closeCache, nil
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
