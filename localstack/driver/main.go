// Command driver is the local event source mapping for make local, make e2e
// and manual testing: it runs the SQS and stream Lambda functions under the
// Runtime Interface Emulator — several per SQS mapping, which Lambda invokes
// several batches at once, one for the stream — and feeds them from moto
// (or LocalStack) the way Lambda would in AWS, with template.yaml's
// settings unless flags say otherwise: the SQS function from a queue, the
// stream function from a table's stream and the Kinesis function from a
// Kinesis stream (the stream's settings for both), resumed from its checkpoints after
// a restart, the coordinates of stream records given up on to an
// on-failure queue, or the records whole to a bucket. The functions inherit this process's environment
// (CACHE_*, INVALIDATION_RULES, FAILURE_QUEUE_URL...).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/localstack/esm"
	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/worker"
)

type settings struct {
	queue, again, table, kinesis, dlq     string
	bin, state                            string
	timeout, sqsWindow, sqsWait           time.Duration
	sqsBatch, streamBatch, sqsConcurrency int
	retries                               int
	maxAge                                time.Duration
	bisect, latest                        bool
}

func main() {
	var s settings
	flag.StringVar(&s.queue, "queue", os.Getenv("RAW_QUEUE_URL"), "queue feeding sqs-invalidate (none: no SQS mapping) [RAW_QUEUE_URL]")
	flag.StringVar(&s.again, "again-queue", os.Getenv("SECOND_DELETE_QUEUE_URL"), "delay queue of second deletes, feeding sqs-invalidate too (none: no mapping) [SECOND_DELETE_QUEUE_URL]")
	flag.StringVar(&s.table, "table", os.Getenv("TABLE_NAME"), "table whose stream feeds stream-invalidate (none: no stream mapping) [TABLE_NAME]")
	flag.StringVar(&s.kinesis, "kinesis", os.Getenv("CDC_STREAM_NAME"), "Kinesis stream feeding kinesis-invalidate, with the stream's settings (none: no Kinesis mapping) [CDC_STREAM_NAME]")
	flag.StringVar(&s.dlq, "on-failure", os.Getenv("FAILURE_QUEUE_URL"), "on-failure destination of the stream mappings: a queue's URL (the records' coordinates), or a bucket's ARN, arn:aws:s3:::NAME (the records whole) [FAILURE_QUEUE_URL]")
	flag.StringVar(&s.bin, "bin", "bin", "directory of the built functions (make build)")
	flag.StringVar(&s.state, "state", filepath.Join(os.Getenv("LOCAL_STATE"), "esm"), "directory of the stream checkpoints, kept across restarts [LOCAL_STATE/esm]")
	flag.DurationVar(&s.timeout, "timeout", 30*time.Second, "function timeout (FunctionTimeout)")
	flag.IntVar(&s.sqsConcurrency, "sqs-concurrency", 10, "most batches invoked at once per SQS mapping, one emulator each: five always, as Lambda's SQS pollers start, more while messages keep coming")
	flag.IntVar(&s.sqsBatch, "sqs-batch-size", 10, "messages per invoke, 1-10, up to 10000 with a batching window (SqsBatchSize)")
	flag.DurationVar(&s.sqsWait, "sqs-wait-time", 20*time.Second, "long poll of each receive, 1-20 s, as Lambda's pollers wait 20 s; stopping waits out the polls in flight")
	flag.DurationVar(&s.sqsWindow, "sqs-batching-window", 0, "how long a batch of the queue may gather messages, 0 for none (SqsBatchingWindow; the delay queue's has none)")
	flag.IntVar(&s.streamBatch, "stream-batch-size", 1000, "stream records per invoke, 1-1000 (StreamBatchSize)")
	flag.IntVar(&s.retries, "stream-max-retries", -1, "retries of a failed stream record, -1 for no limit (StreamMaximumRetryAttempts)")
	flag.DurationVar(&s.maxAge, "stream-max-age", 6*time.Hour, "age past which a failed stream record is given up, negative for none (StreamMaximumRecordAgeInSeconds)")
	flag.BoolVar(&s.bisect, "stream-bisect", true, "split a batch in two when its invoke fails (BisectBatchOnFunctionError)")
	flag.BoolVar(&s.latest, "stream-latest", false, "start a stream without a checkpoint at LATEST, not TRIM_HORIZON (StartingPosition)")
	flag.Parse()
	log := worker.NewLogger(os.Stdout, slog.LevelInfo).With("function", "driver")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, log, s); err != nil {
		log.Error("driver stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, s settings) error {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	errs := make(chan error, 4)
	mappings := 0
	opts := rie.Options{Output: os.Stdout, Timeout: s.timeout}
	// An emulator takes one invoke at a time: Lambda invokes several SQS
	// batches at once, so each SQS mapping gets several emulators, and the
	// two mappings run side by side.
	for i, url := range []string{s.queue, s.again} {
		if url == "" {
			continue
		}
		var fns []esm.Invoker
		for range max(s.sqsConcurrency, 1) {
			fn, err := rie.Start(filepath.Join(s.bin, "sqs-invalidate", "bootstrap"), opts)
			if err != nil {
				return err
			}
			defer fn.Stop()
			fns = append(fns, fn)
		}
		m := &esm.SQSMapping{Client: sqs.NewFromConfig(cfg), QueueURL: url, Functions: fns, BatchSize: int32(s.sqsBatch), Logger: log,
			InvokeTimeout: s.timeout + 5*time.Second, WaitTime: s.sqsWait}
		if i == 0 { // as in template.yaml, where the delay queue's mapping has no window
			m.BatchingWindow = s.sqsWindow
		}
		go func() { errs <- m.Run(ctx) }()
		mappings++
	}
	if s.table != "" {
		desc, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
		if err != nil {
			return err
		}
		if desc.Table.LatestStreamArn == nil {
			return errors.New("table " + s.table + " has no stream")
		}
		checkpoints, err := esm.LoadCheckpoints(filepath.Join(s.state, "checkpoints.json"))
		if err != nil {
			return err
		}
		fn, err := rie.Start(filepath.Join(s.bin, "stream-invalidate", "bootstrap"), opts)
		if err != nil {
			return err
		}
		defer fn.Stop()
		m := &esm.StreamMapping{Client: dynamodbstreams.NewFromConfig(cfg), StreamARN: *desc.Table.LatestStreamArn, Settings: esm.Settings{
			Function: fn, BatchSize: int32(s.streamBatch), Latest: s.latest, MaxRetryAttempts: s.retries, MaxRecordAge: s.maxAge,
			NoBisect: !s.bisect, Checkpoints: checkpoints, OnFailure: onFailure(cfg, s.dlq, "stream-invalidate "+s.table), Logger: log,
		}}
		go func() { errs <- m.Run(ctx) }()
		mappings++
	}
	if s.kinesis != "" {
		desc, err := kinesis.NewFromConfig(cfg).DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(s.kinesis)})
		if err != nil {
			return err
		}
		checkpoints, err := esm.LoadCheckpoints(filepath.Join(s.state, "kinesis-checkpoints.json"))
		if err != nil {
			return err
		}
		fn, err := rie.Start(filepath.Join(s.bin, "kinesis-invalidate", "bootstrap"), opts)
		if err != nil {
			return err
		}
		defer fn.Stop()
		m := &esm.KinesisMapping{Client: kinesis.NewFromConfig(cfg), StreamARN: aws.ToString(desc.StreamDescriptionSummary.StreamARN), Region: cfg.Region, Settings: esm.Settings{
			Function: fn, BatchSize: int32(s.streamBatch), Latest: s.latest, MaxRetryAttempts: s.retries, MaxRecordAge: s.maxAge,
			NoBisect: !s.bisect, Checkpoints: checkpoints, OnFailure: onFailure(cfg, s.dlq, "kinesis-invalidate "+s.kinesis), Logger: log,
		}}
		go func() { errs <- m.Run(ctx) }()
		mappings++
	}
	if mappings == 0 {
		return errors.New("nothing to drive: give -queue, -table or -kinesis")
	}
	log.Info("driver started", "queue", s.queue, "again_queue", s.again, "table", s.table, "kinesis", s.kinesis)
	for range mappings {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// onFailure is the destination a stream mapping named mapping gives its
// records up to: a bucket by its ARN, else a queue by its URL; none for "".
func onFailure(cfg aws.Config, dest, mapping string) esm.Destination {
	switch bucket, ok := strings.CutPrefix(dest, "arn:aws:s3:::"); {
	case dest == "":
		return nil
	case ok:
		// moto answers the path-style requests, not a bucket's own host.
		return esm.Bucket{Client: s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), Name: bucket, Mapping: mapping}
	default:
		return esm.Queue{Client: sqs.NewFromConfig(cfg), URL: dest}
	}
}
