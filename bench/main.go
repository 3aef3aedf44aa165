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
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/cacheconn"
	"github.com/invalidator-go/invalidator/invalidate"
)

func main() {
	var (
		total      = flag.Int("events", 600_000, "events through the invalidation pipeline")
		batch      = flag.Int("batch", 1000, "SQS messages per batch")
		naiveTotal = flag.Int("naive-events", 20_000, "events through the naive loop")
		refTotal   = flag.Int("reference-requests", 3_000_000, "redis-benchmark requests")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the pipeline run to this file")
	)
	flag.Parse()
	log.SetFlags(0)
	cfg, err := cacheconn.FromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	client, err := cacheconn.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	reference := redisBenchmark(cfg, *refTotal)
	print("reference_unlink_rps", reference)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	rate, allocs := pipeline(ctx, client, *total, *batch)
	pprof.StopCPUProfile()
	print("invalidate_events_per_sec", rate)
	naive := naiveLoop(ctx, client, *naiveTotal)
	print("naive_events_per_sec", naive)
	print("invalidate_vs_limit", rate/reference)
	print("invalidate_vs_naive", rate/naive)
	print("invalidate_allocs_per_event", allocs)
	print("stream10k_peak_heap_mib", stream10k(ctx, client))
}

func print(name string, v float64) {
	fmt.Printf("BENCH %s %s\n", name, strconv.FormatFloat(v, 'f', 3, 64))
}

// redisBenchmark returns the UNLINK requests/s that redis-benchmark gets
// from the server with 50 clients and 64-deep pipelines: the server's limit.
func redisBenchmark(cfg cacheconn.Config, n int) float64 {
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
// cache-invalidation queue receives them, one product change each.
func snsMessages(from, n int) []lambdaevents.SQSMessage {
	msgs := make([]lambdaevents.SQSMessage, n)
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
		msgs[i] = lambdaevents.SQSMessage{MessageId: "m" + id, Body: string(envelope), Attributes: map[string]string{"SentTimestamp": "1795953600000"}}
	}
	return msgs
}

// handle is what the SQS front end does with a batch: decode, then plan and
// delete.
func handle(ctx context.Context, inv *invalidate.Invalidator, msgs []lambdaevents.SQSMessage) invalidate.Report {
	records := invalidate.Records(msgs, func(m *lambdaevents.SQSMessage) invalidate.Record {
		changes, err := events.DecodeSQS(*m)
		return invalidate.Record{ID: m.MessageId, Changes: changes, Err: err}
	})
	return inv.Invalidate(ctx, records)
}

// pipeline returns events/s and allocations per event of handle over
// batches of SNS-in-SQS messages.
func pipeline(ctx context.Context, client valkey.Client, total, batch int) (rate, allocs float64) {
	inv := invalidate.New(client, invalidate.Options{})
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
	start := time.Now()
	for i := range rounds {
		if rep := handle(ctx, inv, batches[i%len(batches)]); rep.Metrics.Failed > 0 {
			log.Fatalf("pipeline: %d records failed: %v", rep.Metrics.Failed, rep.Failed()[:1])
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	n := float64(rounds * batch)
	return n / elapsed.Seconds(), float64(after.Mallocs-before.Mallocs) / n
}

// naiveLoop is the usual recipe: decode, then one UNLINK round trip per
// event.
func naiveLoop(ctx context.Context, client valkey.Client, total int) float64 {
	msgs := snsMessages(0, total)
	rules := invalidate.DefaultRules()
	start := time.Now()
	for _, m := range msgs {
		changes, err := events.DecodeSQS(m)
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
// report: unmarshal, decode, plan and delete.
func stream10k(ctx context.Context, client valkey.Client) float64 {
	payload := streamPayload(10_000)
	inv := invalidate.New(client, invalidate.Options{})
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
	var ev lambdaevents.DynamoDBEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		log.Fatal(err)
	}
	records := invalidate.Records(ev.Records, func(r *lambdaevents.DynamoDBEventRecord) invalidate.Record {
		c, err := events.DecodeDynamoDB(*r)
		return invalidate.Record{ID: r.Change.SequenceNumber, Changes: []events.Change{c}, Err: err}
	})
	rep := inv.Invalidate(ctx, records)
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

// streamPayload builds the JSON of a MODIFY batch of n records shaped like
// the ones moto emits for the Products table, about 550 bytes each, so the
// batch stays under Lambda's 6 MB payload limit.
func streamPayload(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"Records":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"eventID":"%032x","eventName":"MODIFY","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",`+
			`"dynamodb":{"ApproximateCreationDateTime":1795953600,"Keys":{"id":{"S":"p-%d"}},`+
			`"NewImage":{"id":{"S":"p-%d"},"category":{"S":"boots"},"price":{"N":"19.99"},"stock":{"N":"7"},"active":{"BOOL":true},"tags":{"SS":["winter"]}},`+
			`"OldImage":{"id":{"S":"p-%d"},"category":{"S":"shoes"},"price":{"N":"21.50"},"stock":{"N":"8"},"active":{"BOOL":true},"tags":{"SS":["sale","summer"]}},`+
			`"SequenceNumber":"110000000001%010d","SizeBytes":312,"StreamViewType":"NEW_AND_OLD_IMAGES"},`+
			`"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/Products/stream/2026-11-29T12:00:00.000"}`, i, i, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}
