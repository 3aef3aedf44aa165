package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/rie"
)

// memoryGroup measures the stream function's peak heap and RSS over one
// 10,000-record batch.
func memoryGroup(ctx context.Context, s server, bin string) {
	print("stream10k_peak_heap_mib", stream10k(ctx, s.client))
	print("stream10k_peak_rss_mib", streamRSS(filepath.Join(bin, "stream-invalidate", "bootstrap")))
}

// stream10k returns the peak heap, in MiB, of taking one 10,000-record
// DynamoDB stream batch from its JSON payload (as Lambda delivers it) to the
// report, as the stream function does: split, decode, plan and delete.
func stream10k(ctx context.Context, client valkey.Client) float64 {
	payload := lambdaevent.StreamPayload(10_000)
	inv := invalidate.New(invalidate.Valkey(client), invalidate.Options{})
	peak := peakHeap(func() {
		raws, err := events.SplitRecords(payload)
		if err != nil {
			log.Fatal(err)
		}
		rep := inv.Invalidate(ctx, invalidate.Inputs(raws, func(raw *[]byte) invalidate.Record {
			seq, c, err := events.DecodeDynamoDBJSON(*raw, inv.Rules().Attributes())
			return invalidate.Record{ID: seq, Changes: []events.Change{c}, Err: err}
		}))
		if rep.Metrics.Failed > 0 {
			log.Fatalf("stream batch: %d records failed", rep.Metrics.Failed)
		}
	})
	runtime.KeepAlive(payload)
	return peak
}

// peakHeap runs fn and returns the peak live heap while it ran, in MiB,
// above the heap before it, sampled every 50 µs.
func peakHeap(fn func()) float64 {
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
	fn()
	close(done)
	if h := heapBytes(); h > peak.Load() {
		peak.Store(h)
	}
	return float64(peak.Load()-min(base, peak.Load())) / (1 << 20)
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
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
	var ev json.RawMessage = lambdaevent.StreamPayload(10_000)
	if len(ev) > 6_000_000 {
		log.Fatalf("stream payload of %d bytes is over Lambda's 6 MB", len(ev))
	}
	out, err := fn.Invoke(context.Background(), ev)
	if err != nil {
		log.Fatalf("stream batch: %v", err)
	}
	var resp lambdaevents.DynamoDBEventResponse
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
