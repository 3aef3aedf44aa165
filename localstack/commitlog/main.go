// Command commitlog is make local's stand-in for Debezium Server with its
// Kinesis sink: it reads the local PostgreSQL's logical replication slot
// (localstack/cdc) and puts each row's change on a Kinesis stream in moto,
// in commit order, then confirms them to the slot. Stopped or killed
// between a commit and its put, it reads the change again when started:
// at least once, as Debezium after a crash. It reaches the database by
// the PG* variables, as psql does (localstack/env.sh sets them), over one
// connection, made again when it breaks.
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
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/jackc/pgx/v5"

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
	p := pump{kinesis: kinesis.NewFromConfig(cfg), slot: *slot, stream: *stream, database: *database, log: log}
	defer p.close()
	log.Info("reading the commit log", "slot", *slot, "stream", *stream)
	for ctx.Err() == nil {
		n, err := p.once(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("the commit log: retrying", "error", err.Error())
			p.close() // a broken connection is made again
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
	db                     *pgx.Conn // nil until connected
	slot, stream, database string
	log                    *slog.Logger
}

func (p *pump) close() {
	if p.db != nil {
		_ = p.db.Close(context.Background())
		p.db = nil
	}
}

// once puts what the slot has on the stream and confirms it. A PutRecords
// request keeps its order on a shard, one request a turn of the loop (a
// PutRecord a change fell seconds behind make soak-short's rate). Kinesis may refuse some records of a request
// (throttled) and take those after them: they are put again from the first
// refused on, so each change's last copy follows every change committed
// before it.
func (p *pump) once(ctx context.Context) (int, error) {
	if p.db == nil {
		db, err := pgx.Connect(ctx, "")
		if err != nil {
			return 0, err
		}
		p.db = db
	}
	events, upto, err := cdc.Read(ctx, p.db, p.slot, p.database, 500)
	if err != nil || upto == "" {
		return 0, err
	}
	for rest := events; len(rest) > 0; {
		batch := request(rest)
		entries := make([]types.PutRecordsRequestEntry, len(batch))
		for i, ev := range batch {
			entries[i] = types.PutRecordsRequestEntry{Data: ev, PartitionKey: aws.String(p.slot)}
		}
		out, err := p.kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(p.stream), Records: entries})
		if err != nil {
			return 0, err
		}
		put := len(batch)
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				put = i
				p.log.Warn("the stream refused a change: putting it again", "error", aws.ToString(r.ErrorCode)+": "+aws.ToString(r.ErrorMessage))
				break
			}
		}
		if rest = rest[put:]; put < len(batch) {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if err := cdc.Confirm(ctx, p.db, p.slot, upto); err != nil {
		return 0, err
	}
	if len(events) > 0 {
		p.log.Info("changes put on the stream", "changes", len(events), "lsn", upto)
	}
	return len(events), nil
}

// request is the head of events one PutRecords request carries: at most
// 500 records and 5 MiB of data and partition keys.
func request(events [][]byte) [][]byte {
	const maxRecords, maxBytes = 500, 5 << 20
	size := 0
	for i, ev := range events {
		if size += len(ev) + 64; i == maxRecords || (size > maxBytes && i > 0) {
			return events[:i]
		}
	}
	return events
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
