// Command commitlog is make local's stand-in for Debezium Server with its
// Kinesis sink: it reads the local PostgreSQL's logical replication slot
// (localstack/cdc) and puts each row's change on a Kinesis stream in moto,
// in commit order, then confirms them to the slot. Stopped or killed
// between a commit and its put, it reads the change again when started:
// at least once, as Debezium after a crash. psql reaches the database by
// the PG* variables (localstack/env.sh sets them).
//
// Where it differs from Debezium Server: every change goes to one
// partition key, the slot's name (Debezium's is the row's key), so that
// they keep the commit order across tables; it polls the slot (-every)
// instead of streaming it; and see localstack/cdc for the records.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/invalidator-go/invalidator/localstack/cdc"
	"github.com/invalidator-go/invalidator/worker"
)

func main() {
	slot := flag.String("slot", envOr("CDC_SLOT", "invalidator"), "wal2json replication slot to read [CDC_SLOT]")
	stream := flag.String("stream", os.Getenv("CDC_STREAM_NAME"), "Kinesis stream to put the changes on [CDC_STREAM_NAME]")
	database := flag.String("database", os.Getenv("PGDATABASE"), "the database's name, as the records' source.db [PGDATABASE]")
	every := flag.Duration("every", 100*time.Millisecond, "pause between reads of the slot while it has nothing new")
	flag.Parse()
	log := worker.NewLogger(os.Stdout, slog.LevelInfo).With("function", "commitlog")
	if *stream == "" {
		log.Error("no stream: set -stream or CDC_STREAM_NAME")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("commitlog stopped", "error", err.Error())
		os.Exit(1)
	}
	p := pump{kinesis.NewFromConfig(cfg), []string{"psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"}, *slot, *stream, *database, log}
	log.Info("reading the commit log", "slot", *slot, "stream", *stream)
	for ctx.Err() == nil {
		n, err := p.once(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("the commit log: retrying", "error", err.Error())
		}
		if n == 0 || err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(*every):
			}
		}
	}
}

type pump struct {
	kinesis                *kinesis.Client
	psql                   []string
	slot, stream, database string
	log                    *slog.Logger
}

// once puts what the slot has on the stream, one by one (PutRecords would
// not keep their order), and confirms it.
func (p pump) once(ctx context.Context) (int, error) {
	events, upto, err := cdc.Read(ctx, p.psql, p.slot, p.database, 500)
	if err != nil || upto == "" {
		return 0, err
	}
	var after *string
	for _, ev := range events {
		out, err := p.kinesis.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(p.stream), Data: ev,
			PartitionKey: aws.String(p.slot), SequenceNumberForOrdering: after})
		if err != nil {
			return 0, err
		}
		after = out.SequenceNumber
	}
	if err := cdc.Confirm(ctx, p.psql, p.slot, upto); err != nil {
		return 0, err
	}
	if len(events) > 0 {
		p.log.Info("changes put on the stream", "changes", len(events), "lsn", upto)
	}
	return len(events), nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
