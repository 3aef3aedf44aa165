package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/bench/plot"
	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/lambda"
)

// throughputOptions are the throughput group's flags.
type throughputOptions struct {
	total, batch, naiveTotal, refTotal, rounds int
	cpuProfile                                 string
}

// throughputGroup measures the pipeline against the server's limit and the
// naive loop, the SQS function's whole path against aws-lambda-go's
// decoding, and the pipeline by batch size, which it plots into out.
func throughputGroup(ctx context.Context, s server, o throughputOptions, out results) {
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	// The machine's speed drifts: each round measures the references
	// and the pipeline back to back, and the median of the rounds'
	// ratios is reported.
	var refs, rates, deletes, naives, allocs, payloads, lambdaGo, refCPU, keyCPU []float64
	byBatch := make([][]float64, len(batchSizes))
	for range o.rounds {
		cpu := s.used()
		refs = append(refs, redisBenchmark(s.cfg, o.refTotal))
		refCPU = append(refCPU, (s.used()-cpu).Seconds()/float64(o.refTotal))
		r := pipeline(ctx, s.client, o.total, o.batch, s.used)
		rates, allocs, deletes = append(rates, r.invalidate), append(allocs, r.allocs), append(deletes, r.deleteOnly)
		payloads, lambdaGo, keyCPU = append(payloads, r.payload), append(lambdaGo, r.lambdaGoDecode), append(keyCPU, r.serverCPUPerKey)
		naives = append(naives, naiveLoop(ctx, s.client, o.naiveTotal))
		for i, size := range batchSizes {
			byBatch[i] = append(byBatch[i], batchRate(ctx, s.client, size))
		}
	}
	pprof.StopCPUProfile()
	print("reference_unlink_rps", median(refs))
	print("invalidate_events_per_sec", median(rates))
	print("naive_events_per_sec", median(naives))
	print("invalidate_vs_limit", medianRatio(rates, refs))
	print("delete_only_vs_limit", medianRatio(deletes, refs))
	print("invalidate_vs_naive", medianRatio(rates, naives))
	print("invalidate_allocs_per_event", median(allocs))
	print("sqs_payload_events_per_sec", median(payloads))
	print("lambda_go_decode_events_per_sec", median(lambdaGo))
	print("sqs_payload_vs_lambda_go_decode", medianRatio(payloads, lambdaGo))
	if s.local {
		print("server_cpu_per_key_vs_reference", medianRatio(keyCPU, refCPU))
	}
	perBatch := make([]float64, len(batchSizes))
	for i, rs := range byBatch {
		perBatch[i] = median(rs)
		print("invalidate_events_per_sec_batch_"+strconv.Itoa(batchSizes[i]), perBatch[i])
	}
	for _, path := range out.plots() {
		if err := plot.Throughput(path, batchSizes, perBatch, median(naives), median(refs)); err != nil {
			log.Fatal(err)
		}
	}
}

// redisBenchmark returns the UNLINK requests/s that redis-benchmark gets
// from the server with 50 clients and 64-deep pipelines: the server's limit.
func redisBenchmark(cfg elasticache.Config, n int) float64 {
	host, port, _ := strings.Cut(cfg.Endpoint, ":")
	args := []string{"-h", host, "-p", port, "-P", "64", "-c", "50", "-n", strconv.Itoa(n), "-r", "1000000", "--csv"}
	if cfg.TLS {
		args = append(args, "--tls")
		if cfg.CAFile != "" {
			args = append(args, "--cacert", cfg.CAFile)
		}
	}
	if cfg.Username != "" {
		args = append(args, "--user", cfg.Username, "-a", cfg.Password)
	}
	args = append(args, "UNLINK", "cache:product:__rand_int__")
	// make setup installs Debian's valkey-tools, whose tool is
	// valkey-benchmark; redis-tools, where no Valkey package is, has
	// redis-benchmark, the same tool.
	tool, err := exec.LookPath("valkey-benchmark")
	if err != nil {
		tool = "redis-benchmark"
	}
	out, err := exec.Command(tool, args...).Output()
	if err != nil {
		log.Fatalf("%s: %v", tool, err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 {
		log.Fatalf("redis-benchmark output: %q", out)
	}
	rps, err := strconv.ParseFloat(rows[1][1], 64)
	if err != nil {
		log.Fatalf("redis-benchmark rps %q: %v", rows[1][1], err)
	}
	return rps
}

// handle is what the SQS front end does with a batch: decode, then plan and
// delete.
func handle(ctx context.Context, inv *invalidate.Invalidator, msgs []lambdaevents.SQSMessage) invalidate.Report {
	return inv.Invalidate(ctx, invalidate.Inputs(msgs, decodeSQS))
}

// batchSizes are the batch sizes of the throughput plot.
var batchSizes = []int{1, 10, 100, 1000, 10000}

// batchRate returns the events/s of handle in batches of size messages,
// over enough batches to take a fraction of a second.
func batchRate(ctx context.Context, client valkey.Client, size int) float64 {
	inv := invalidate.New(invalidate.Valkey(client), invalidate.Options{})
	batches := make([][]lambdaevents.SQSMessage, 4)
	for i := range batches {
		batches[i] = snsMessages(i*size, size)
	}
	handle(ctx, inv, batches[0])
	rounds := max(20, min(200_000, 100*size)/size)
	start := time.Now()
	for i := range rounds {
		if rep := handle(ctx, inv, batches[i%len(batches)]); rep.Metrics.Failed > 0 {
			log.Fatalf("batches of %d: %d records failed", size, rep.Metrics.Failed)
		}
	}
	return float64(rounds*size) / time.Since(start).Seconds()
}

// pipeline returns events/s and allocations per event of handle over
// batches of SNS-in-SQS messages, the events/s of its plan-and-delete
// part alone (records decoded beforehand): the ceiling the decoding works
// under, and the events/s of the SQS function's whole path from the Lambda
// payload, against aws-lambda-go's decoding of those payloads alone.
func pipeline(ctx context.Context, client valkey.Client, total, batch int, serverUsed func() time.Duration) (r rates) {
	inv := invalidate.New(invalidate.Valkey(client), invalidate.Options{})
	// A few distinct batches, cycled: holding every message at once would
	// make the benchmark measure the garbage collector on a huge heap.
	batches := make([][]lambdaevents.SQSMessage, 16)
	for i := range batches {
		batches[i] = snsMessages(i*batch, batch)
	}
	handle(ctx, inv, batches[0]) // connections warm
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rounds := max(1, total/batch)
	cpu := serverUsed()
	start := time.Now()
	for i := range rounds {
		if rep := handle(ctx, inv, batches[i%len(batches)]); rep.Metrics.Failed > 0 {
			log.Fatalf("pipeline: %d records failed", rep.Metrics.Failed)
		}
	}
	elapsed := time.Since(start)
	cpu = serverUsed() - cpu
	runtime.ReadMemStats(&after)
	n := float64(rounds * batch)
	r.serverCPUPerKey = cpu.Seconds() / n // one distinct key per event

	decoded := make([]invalidate.Batch, len(batches))
	for i, b := range batches {
		records := make([]invalidate.Record, len(b))
		for j := range b {
			records[j] = decodeSQS(&b[j])
		}
		decoded[i] = invalidate.Decoded(records)
	}
	start = time.Now()
	for i := range rounds {
		inv.Invalidate(ctx, decoded[i%len(decoded)])
	}
	r.invalidate, r.allocs, r.deleteOnly = n/elapsed.Seconds(), float64(after.Mallocs-before.Mallocs)/n, n/time.Since(start).Seconds()

	payloads := make([][]byte, len(batches))
	for i, b := range batches {
		payloads[i], _ = json.Marshal(lambdaevents.SQSEvent{Records: b})
	}
	w := worker.New(inv, worker.Options{Name: "sqs-invalidate", Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard})
	start = time.Now()
	for i := range rounds {
		if resp, err := lambda.SQS(w, ctx, payloads[i%len(payloads)]); err != nil || len(resp.BatchItemFailures) > 0 {
			log.Fatalf("SQS function: %d failures (%v)", len(resp.BatchItemFailures), err)
		}
	}
	r.payload = n / time.Since(start).Seconds()
	start = time.Now()
	for i := range max(1, rounds/4) { // far slower: a quarter of the batches
		var ev lambdaevents.SQSEvent
		if err := json.Unmarshal(payloads[i%len(payloads)], &ev); err != nil {
			log.Fatal(err)
		}
	}
	r.lambdaGoDecode = float64(max(1, rounds/4)*batch) / time.Since(start).Seconds()
	return r
}

// rates are one round of pipeline's figures, in events/s but allocs.
type rates struct {
	invalidate, allocs, deleteOnly, payload, lambdaGoDecode float64
	serverCPUPerKey                                         float64 // seconds
}

func decodeSQS(m *lambdaevents.SQSMessage) invalidate.Record {
	changes, err := events.DecodeSQSBody(m.MessageId, m.Body, m.Attributes["SentTimestamp"])
	return invalidate.Record{ID: m.MessageId, Changes: changes, Err: err}
}

// naiveLoop is the usual recipe: decode, then one UNLINK round trip per
// event.
func naiveLoop(ctx context.Context, client valkey.Client, total int) float64 {
	msgs := snsMessages(0, total)
	rules := invalidate.DefaultRules()
	start := time.Now()
	for _, m := range msgs {
		changes, err := events.DecodeSQSBody(m.MessageId, m.Body, m.Attributes["SentTimestamp"])
		if err != nil {
			log.Fatal(err)
		}
		for i := range changes {
			keys, err := rules.Keys(&changes[i], nil)
			if err != nil {
				log.Fatal(err)
			}
			for _, k := range keys {
				if err := client.Do(ctx, client.B().Unlink().Key(k).Build()).Error(); err != nil {
					log.Fatal(err)
				}
			}
		}
	}
	return float64(total) / time.Since(start).Seconds()
}
