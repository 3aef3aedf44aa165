// Command driver is the local event source mapping for make local and
// manual testing: it runs the SQS and stream Lambda functions under the
// Runtime Interface Emulator, one emulator each, and feeds them from moto
// (or LocalStack) the way Lambda would in AWS: the SQS function from a
// queue, the stream function from a table's stream, failed stream records
// to a DLQ once their retries are spent. The functions inherit this
// process's environment (CACHE_*, INVALIDATION_RULES...).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/internal/esm"
	"github.com/invalidator-go/invalidator/internal/rie"
	"github.com/invalidator-go/invalidator/internal/worker"
)

func main() {
	var (
		queue = flag.String("queue", os.Getenv("RAW_QUEUE_URL"), "queue feeding sqs-invalidate (none: no SQS mapping)")
		table = flag.String("table", os.Getenv("TABLE_NAME"), "table whose stream feeds stream-invalidate (none: no stream mapping)")
		dlq   = flag.String("dlq", os.Getenv("FAILURE_QUEUE_URL"), "on-failure queue of the stream mapping")
		bin   = flag.String("bin", "bin", "directory of the built functions (make build)")
	)
	flag.Parse()
	log := worker.NewLogger(os.Stdout, slog.LevelInfo).With("function", "driver")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, log, *queue, *table, *dlq, *bin); err != nil {
		log.Error("driver stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, queue, table, dlq, bin string) error {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	errs := make(chan error, 2)
	mappings := 0
	if queue != "" {
		fn, err := rie.Start(filepath.Join(bin, "sqs-invalidate", "bootstrap"), rie.Options{Output: os.Stdout})
		if err != nil {
			return err
		}
		defer fn.Stop()
		m := &esm.SQSMapping{Client: sqs.NewFromConfig(cfg), QueueURL: queue, Function: fn, Logger: log}
		go func() { errs <- m.Run(ctx) }()
		mappings++
	}
	if table != "" {
		desc, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return err
		}
		if desc.Table.LatestStreamArn == nil {
			return errors.New("table " + table + " has no stream")
		}
		fn, err := rie.Start(filepath.Join(bin, "stream-invalidate", "bootstrap"), rie.Options{Output: os.Stdout})
		if err != nil {
			return err
		}
		defer fn.Stop()
		m := &esm.StreamMapping{
			Client: dynamodbstreams.NewFromConfig(cfg), StreamARN: *desc.Table.LatestStreamArn, Function: fn,
			OnFailure: sqs.NewFromConfig(cfg), DLQURL: dlq, Logger: log,
		}
		go func() { errs <- m.Run(ctx) }()
		mappings++
	}
	if mappings == 0 {
		return errors.New("nothing to drive: give -queue or -table")
	}
	log.Info("driver started", "queue", queue, "table", table)
	for range mappings {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}
