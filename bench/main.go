// Command bench measures the invalidation core against references taken in
// the same run, on the same server, and prints one line per figure:
//
//	BENCH <name> <value>
//
// It expects the cache configuration in the environment (make bench starts a
// single-node TLS cluster for it, the shape ElastiCache Serverless shows)
// and redis-benchmark on PATH.
package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/bench/plot"
	"github.com/invalidator-go/invalidator/elasticache"
	decode "github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/frontend/lambda/event"
	"github.com/invalidator-go/invalidator/frontend/worker"
	"github.com/invalidator-go/invalidator/internal/rie"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/writethrough"
)

func main() {
	var (
		total      = flag.Int("events", 400_000, "events through the invalidation pipeline, per round")
		batch      = flag.Int("batch", 1000, "SQS messages per batch")
		naiveTotal = flag.Int("naive-events", 10_000, "events through the naive loop, per round")
		refTotal   = flag.Int("reference-requests", 2_000_000, "redis-benchmark requests, per round")
		rounds     = flag.Int("rounds", 3, "rounds of reference, pipeline and naive loop; the medians count")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the pipeline runs to this file")
		bin        = flag.String("bin", "bin", "directory of the built functions (make build)")
		coldRuns   = flag.Int("cold-starts", 101, "cold-start pairs (hello, sqs-invalidate) measured; the median counts")
		only       = flag.String("only", "", "comma-separated groups to run (coldstart, throughput, memory, reads, cost); all when empty")
		costCell   = flag.String("cost-cell", "", "the one cell of the cost group to run, e.g. sqs_b10_sd; the README is left as it is")
	)
	flag.Parse()
	log.SetFlags(0)
	run := func(group string) bool { return *only == "" || slices.Contains(strings.Split(*only, ","), group) }
	cfg, err := elasticache.FromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	client, err := elasticache.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	serverUsed, serverLocal := serverCPU(ctx, client)

	// Cold starts first, while this process is small and idle: on two
	// CPUs its garbage collector, sweeping after the throughput runs,
	// would otherwise compete with the emulator, the function and the
	// server's TLS handshake, and with hello less than with the function.
	if run("coldstart") {
		hello, helloConnect := build("hello"), build("helloconnect")
		defer os.RemoveAll(filepath.Dir(hello))
		defer os.RemoveAll(filepath.Dir(helloConnect))
		c := coldStarts([]coldFunction{{hello, nil}, {helloConnect, functionEnv()},
			{filepath.Join(*bin, "sqs-invalidate", "bootstrap"), functionEnv()}}, *coldRuns, serverUsed)
		print("coldstart_hello_ms", c.ms[0])
		print("coldstart_hello_connect_ms", c.ms[1])
		print("coldstart_sqs_invalidate_ms", c.ms[2])
		print("coldstart_vs_hello", c.vs[0])
		print("coldstart_vs_hello_connect", c.vs[1])
		if serverLocal {
			print("coldstart_server_cpu_ms", ms(c.serverCPU)/float64(*coldRuns))
		}
	}

	if run("throughput") {
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
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
		for range *rounds {
			cpu := serverUsed()
			refs = append(refs, redisBenchmark(cfg, *refTotal))
			refCPU = append(refCPU, (serverUsed()-cpu).Seconds()/float64(*refTotal))
			r := pipeline(ctx, client, *total, *batch, serverUsed)
			rates, allocs, deletes = append(rates, r.invalidate), append(allocs, r.allocs), append(deletes, r.deleteOnly)
			payloads, lambdaGo, keyCPU = append(payloads, r.payload), append(lambdaGo, r.lambdaGoDecode), append(keyCPU, r.serverCPUPerKey)
			naives = append(naives, naiveLoop(ctx, client, *naiveTotal))
			for i, size := range batchSizes {
				byBatch[i] = append(byBatch[i], batchRate(ctx, client, size))
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
		if serverLocal {
			print("server_cpu_per_key_vs_reference", medianRatio(keyCPU, refCPU))
		}
		perBatch := make([]float64, len(batchSizes))
		for i, rs := range byBatch {
			perBatch[i] = median(rs)
			print("invalidate_events_per_sec_batch_"+strconv.Itoa(batchSizes[i]), perBatch[i])
		}
		if err := plot.Throughput(throughputPlot, batchSizes, perBatch, median(naives), median(refs)); err != nil {
			log.Fatal(err)
		}
	}

	if run("memory") {
		print("stream10k_peak_heap_mib", stream10k(ctx, client))
		print("stream10k_peak_rss_mib", streamRSS(filepath.Join(*bin, "stream-invalidate", "bootstrap")))
	}

	if run("reads") {
		hits, plains := getHits(ctx, client)
		print("get_hit_ops_per_sec", median(hits))
		print("plain_get_ops_per_sec", median(plains))
		print("get_hit_vs_plain_get", medianRatio(hits, plains))
		print("stampede_loads", float64(stampede(cfg)))
	}
	if run("cost") {
		naive := build("helloconnect")
		defer os.RemoveAll(filepath.Dir(naive))
		costGroup(ctx, client, *bin, naive, *costCell)
	}
	if err := writeReadme("README.md"); err != nil {
		log.Fatal(err)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// medianRatio is the median of the rounds' ratios a[i]/b[i].
func medianRatio(a, b []float64) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return median(r)
}

type product struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Price int64  `json:"price"`
}

// getHits returns the hits/s of writethrough's Get and the GETs/s of a
// plain GET loop on the same key, each from 16 goroutines, in three rounds.
func getHits(ctx context.Context, client valkey.Client) (hit, plain []float64) {
	const workers, each = 16, 20_000
	cache := writethrough.New[product](client, writethrough.Options[product]{})
	key := "bench:get:{p}"
	if _, err := cache.Get(ctx, key, func(context.Context) (product, error) {
		return product{ID: "42", Name: "Walking boots", Price: 8999}, nil
	}); err != nil {
		log.Fatal(err)
	}
	run := func(op func() error) float64 {
		var wg sync.WaitGroup
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for range each {
					if err := op(); err != nil {
						log.Fatal(err)
					}
				}
			})
		}
		wg.Wait()
		return workers * each / time.Since(start).Seconds()
	}
	miss := func(context.Context) (product, error) { return product{}, errors.New("a hit was expected") }
	// Rounds of both, back to back, as for the pipeline: the medians count.
	var hits, plains []float64
	for range 3 {
		plains = append(plains, run(func() error { return client.Do(ctx, client.B().Get().Key(key).Build()).Error() }))
		hits = append(hits, run(func() error { _, err := cache.Get(ctx, key, miss); return err }))
	}
	return hits, plains
}

// stampede returns how often the loader runs when 200 readers, spread over
// 10 clients as over 10 processes, ask for one missing key at once.
func stampede(cfg elasticache.Config) int32 {
	key := "bench:stampede:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	var loads atomic.Int32
	load := func(context.Context) (product, error) {
		loads.Add(1)
		time.Sleep(50 * time.Millisecond)
		return product{ID: "hot"}, nil
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		client, err := elasticache.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer client.Close()
		cache := writethrough.New[product](client, writethrough.Options[product]{})
		for range 20 {
			wg.Go(func() {
				<-start
				if _, err := cache.Get(context.Background(), key, load); err != nil {
					log.Fatal(err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return loads.Load()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// functionEnv points a function at the benchmark's cache, second deletes
// off: they add an SQS send to an invoke, which neither reference makes.
func functionEnv() []string {
	cfg, _ := elasticache.FromEnv(os.Getenv)
	return append(cfg.Env(), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128", "SECOND_DELETE_DELAY=0")
}

// build builds a reference bootstrap as the functions are built.
func build(name string) string {
	dir, err := os.MkdirTemp("", "bench-"+name+"-")
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", path, "./"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return path
}

// coldFunction is a bootstrap and its environment.
type coldFunction struct {
	bootstrap string
	env       []string
}

// coldResult holds each function's median cold start in ms, the median
// ratios of the last function's to each other's, and the server CPU the
// last one's cold starts used.
type coldResult struct {
	ms, vs    []float64
	serverCPU time.Duration
}

// coldStarts times first invokes — a function's init and its first handler
// call — from outside fresh emulators, in rounds of one cold start of each
// function, so that all see the same machine, the order rotating from round
// to round. The last function is the one measured against the others.
func coldStarts(fns []coldFunction, runs int, serverUsed func() time.Duration) coldResult {
	times := make([][]float64, len(fns))
	ratios := make([][]float64, len(fns)-1)
	var r coldResult
	for i := range runs {
		round := make([]time.Duration, len(fns))
		for k := range fns {
			j := (i + k) % len(fns)
			before := serverUsed()
			round[j] = coldStart(fns[j].bootstrap, fns[j].env)
			if j == len(fns)-1 {
				r.serverCPU += serverUsed() - before
			}
		}
		for j, d := range round {
			times[j] = append(times[j], ms(d))
			if j < len(fns)-1 {
				ratios[j] = append(ratios[j], float64(round[len(fns)-1])/float64(d))
			}
		}
	}
	for _, t := range times {
		r.ms = append(r.ms, median(t))
	}
	for _, x := range ratios {
		r.vs = append(r.vs, median(x))
	}
	return r
}

func coldStart(bootstrap string, env []string) time.Duration {
	fn, err := rie.Start(bootstrap, rie.Options{Env: env, Output: io.Discard})
	if err != nil {
		log.Fatal(err)
	}
	defer fn.Stop()
	start := time.Now()
	if _, err := fn.Invoke(context.Background(), events.SQSEvent{Records: snsMessages(0, 1)}); err != nil {
		log.Fatalf("cold start of %s: %v", bootstrap, err)
	}
	return time.Since(start)
}

// serverCPU returns what tells the CPU time the cache server has used so
// far, and whether it can: the server must run on this machine, as make
// bench's does. It is read from /proc in clock ticks, 10 ms on Linux.
func serverCPU(ctx context.Context, client valkey.Client) (func() time.Duration, bool) {
	none := func() time.Duration { return 0 }
	info, err := client.Do(ctx, client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return none, false
	}
	_, pid, _ := strings.Cut(info, "process_id:")
	pid, _, _ = strings.Cut(pid, "\r\n")
	if _, err := processCPU(pid); pid == "" || err != nil {
		return none, false
	}
	return func() time.Duration { cpu, _ := processCPU(pid); return cpu }, true
}

// streamRSS returns the peak resident memory, in MiB, of the stream function
// (told it has 128 MB, as the smallest Lambda) handling one 10,000-record
// batch under the emulator.
func streamRSS(bootstrap string) float64 {
	fn, err := rie.Start(bootstrap, rie.Options{Env: functionEnv(), Output: io.Discard})
	if err != nil {
		log.Fatal(err)
	}
	defer fn.Stop()
	var ev json.RawMessage = event.StreamPayload(10_000)
	if len(ev) > 6_000_000 {
		log.Fatalf("stream payload of %d bytes is over Lambda's 6 MB", len(ev))
	}
	out, err := fn.Invoke(context.Background(), ev)
	if err != nil {
		log.Fatalf("stream batch: %v", err)
	}
	var resp events.DynamoDBEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
		log.Fatalf("stream batch: %d failures (%v)", len(resp.BatchItemFailures), err)
	}
	pid, err := fn.FunctionPID()
	if err != nil {
		log.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")))
			return float64(n) / 1024
		}
	}
	log.Fatal("no VmHWM in /proc status")
	return 0
}

// printed is this run's lines, for bench/README.md.
var printed [][2]string

func print(name string, v float64) {
	value := strconv.FormatFloat(v, 'f', 3, 64)
	printed = append(printed, [2]string{name, value})
	fmt.Printf("BENCH %s %s\n", name, value)
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
	out, err := exec.Command("redis-benchmark", args...).Output()
	if err != nil {
		log.Fatalf("redis-benchmark: %v", err)
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

// signature is as long as the real ones: most of an envelope's bytes.
var signature = strings.Repeat("EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjwu6A4VbeS0QHVCkhRS7fUQ", 5)

// snsMessages builds SQS messages carrying SNS envelopes, as the
// cache-invalidation queue receives them and Lambda delivers them, one
// product change each.
func snsMessages(from, n int) []events.SQSMessage {
	msgs := make([]events.SQSMessage, n)
	for i := range msgs {
		id := strconv.Itoa(from + i)
		change, _ := json.Marshal(map[string]any{"entity": "product", "id": id, "op": "update", "version": 3})
		envelope, _ := json.Marshal(map[string]string{
			"Type": "Notification", "MessageId": "5f2b4c5e-0000-4000-8000-" + fmt.Sprintf("%012d", from+i),
			"TopicArn": "arn:aws:sns:us-east-1:123456789012:cache-changes", "Message": string(change),
			"Timestamp": "2026-11-29T12:00:00.000Z", "SignatureVersion": "1", "Signature": signature,
			"SigningCertURL": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem",
			"UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-1:123456789012:cache-changes:0",
		})
		msgs[i] = events.SQSMessage{
			MessageId: fmt.Sprintf("059f36b4-87a3-44ab-83d2-%012d", from+i), Body: string(envelope),
			ReceiptHandle: "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a" + strings.Repeat("Q", 120) + id,
			Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1795953600000",
				"SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1795953600001"},
			MessageAttributes: map[string]events.SQSMessageAttribute{}, Md5OfBody: "e4e68fb7bd0e697a0ae8f1bb342846b3",
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:cache-invalidation", AWSRegion: "us-east-1",
		}
	}
	return msgs
}

// handle is what the SQS front end does with a batch: decode, then plan and
// delete.
func handle(ctx context.Context, inv *invalidate.Invalidator, msgs []events.SQSMessage) invalidate.Report {
	return inv.Invalidate(ctx, invalidate.Inputs(msgs, decodeSQS))
}

// batchSizes are the batch sizes of the throughput plot.
var batchSizes = []int{1, 10, 100, 1000, 10000}

// batchRate returns the events/s of handle in batches of size messages,
// over enough batches to take a fraction of a second.
func batchRate(ctx context.Context, client valkey.Client, size int) float64 {
	inv := invalidate.New(invalidate.Valkey(client), invalidate.Options{})
	batches := make([][]events.SQSMessage, 4)
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
	batches := make([][]events.SQSMessage, 16)
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
			log.Fatalf("pipeline: %d records failed: %v", rep.Metrics.Failed, rep.Failed()[:1])
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
		payloads[i], _ = json.Marshal(events.SQSEvent{Records: b})
	}
	w := worker.New(inv, worker.Options{Name: "sqs-invalidate", Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard})
	start = time.Now()
	for i := range rounds {
		if resp, err := w.SQS(ctx, payloads[i%len(payloads)]); err != nil || len(resp.BatchItemFailures) > 0 {
			log.Fatalf("SQS function: %d failures (%v)", len(resp.BatchItemFailures), err)
		}
	}
	r.payload = n / time.Since(start).Seconds()
	start = time.Now()
	for i := range max(1, rounds/4) { // far slower: a quarter of the batches
		var ev events.SQSEvent
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

func decodeSQS(m *events.SQSMessage) invalidate.Record {
	changes, err := decode.DecodeSQSBody(m.MessageId, m.Body, m.Attributes["SentTimestamp"])
	return invalidate.Record{ID: m.MessageId, Changes: changes, Err: err}
}

// naiveLoop is the usual recipe: decode, then one UNLINK round trip per
// event.
func naiveLoop(ctx context.Context, client valkey.Client, total int) float64 {
	msgs := snsMessages(0, total)
	rules := invalidate.DefaultRules()
	start := time.Now()
	for _, m := range msgs {
		changes, err := decode.DecodeSQSBody(m.MessageId, m.Body, m.Attributes["SentTimestamp"])
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

// stream10k returns the peak heap, in MiB, of taking one 10,000-record
// DynamoDB stream batch from its JSON payload (as Lambda delivers it) to the
// report, as the stream function does: split, decode, plan and delete.
func stream10k(ctx context.Context, client valkey.Client) float64 {
	payload := event.StreamPayload(10_000)
	inv := invalidate.New(invalidate.Valkey(client), invalidate.Options{})
	runtime.GC()
	base := heapBytes()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if h := heapBytes(); h > peak.Load() {
				peak.Store(h)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	raws, err := decode.SplitRecords(payload)
	if err != nil {
		log.Fatal(err)
	}
	rep := inv.Invalidate(ctx, invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record {
		seq, c, err := decode.DecodeDynamoDBJSON(*raw)
		return invalidate.Record{ID: seq, Changes: []decode.Change{c}, Err: err}
	}))
	close(done)
	if rep.Metrics.Failed > 0 {
		log.Fatalf("stream batch: %d records failed", rep.Metrics.Failed)
	}
	if h := heapBytes(); h > peak.Load() {
		peak.Store(h)
	}
	runtime.KeepAlive(payload)
	return float64(peak.Load()-min(base, peak.Load())) / (1 << 20)
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
