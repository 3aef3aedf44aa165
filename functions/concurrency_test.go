package functions

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/localstack/runtimeapi"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// concurrentRecord is one record of the run: its keys, and whether it is
// poison (parked, never planned).
type concurrentRecord struct {
	id     string
	keys   []string
	poison bool
}

// TestManyInvokesInOneProcess: the real SQS and stream bootstraps, each
// one process handed 8 invokes at once (AWS_LAMBDA_MAX_CONCURRENCY, as
// Lambda Managed Instances run them), 32 callers sending 160 batches with
// poison among them, the worker's connections killed every 300 ms, and the
// process crashed once mid-run as an unrecovered panic crashes it (SIGQUIT:
// every invoke it holds is lost, and another process starts): every
// record's keys are deleted in the cache, or its record reported failed
// (for the event source to retry), or it is poison and parked; and the
// race detector, when the binaries carry it (go test -race, make test),
// reports nothing.
func TestManyInvokesInOneProcess(t *testing.T) {
	for _, fn := range []struct {
		name  string
		event func(ns string, batch int) (any, []concurrentRecord)
	}{
		{"sqs-invalidate", sqsBatch},
		{"stream-invalidate", streamBatch},
	} {
		t.Run(fn.name, func(t *testing.T) {
			c := testenv.Cache(t)
			ns := strings.ToLower(rand.Text()[:10])
			failures, env := failureQueue(t)
			cfg := testenv.WorkerCacheConfig(t)
			var out bytes.Buffer
			var outMu sync.Mutex
			rt, err := runtimeapi.Start(binary(fn.name), runtimeapi.Options{Concurrency: 8, Output: lockedWriter{&outMu, &out},
				Env: append(append([]string{"SECOND_DELETE_QUEUE_URL=", "INVALIDATION_RULES=" + streamRules}, env...), cfg.Env()...)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rt.Stop)

			const batches, callers = 160, 32
			type sent struct {
				event   any
				records []concurrentRecord
				resp    []byte
				err     error
			}
			runs := make([]sent, batches)
			var all []string
			for i := range runs {
				runs[i].event, runs[i].records = fn.event(ns, i)
				for _, r := range runs[i].records {
					all = append(all, r.keys...)
				}
			}
			setKeys(t, c, all...)

			ctx, stop := context.WithCancel(t.Context())
			var faults sync.WaitGroup
			faults.Go(func() { killConnections(ctx, t, c, cfg.Username) })
			var wg sync.WaitGroup
			next := make(chan int)
			for range callers {
				wg.Go(func() {
					for i := range next {
						ictx, cancel := context.WithTimeout(t.Context(), time.Minute)
						runs[i].resp, runs[i].err = rt.Invoke(ictx, runs[i].event)
						cancel()
					}
				})
			}
			for i := range batches {
				if i == batches/3 {
					if err := rt.Signal(syscall.SIGQUIT); err != nil {
						t.Fatal(err)
					}
				}
				next <- i
			}
			close(next)
			wg.Wait()
			stop()
			faults.Wait()

			var poison []string
			reported, exited := 0, 0
			for i, r := range runs {
				failed := failedIDs(t, fn.name, r.resp, r.err, r.records)
				if r.err != nil {
					exited++
				}
				for _, rec := range r.records {
					switch {
					case failed[rec.id]:
						reported++
					case rec.poison:
						poison = append(poison, rec.id)
					default:
						for _, k := range rec.keys {
							if n, err := c.Do(t.Context(), c.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
								t.Errorf("batch %d, record %s: %s is still cached and the record was not reported failed (%v)", i, rec.id, k, err)
							}
						}
					}
				}
			}
			if ids := parkedIDs(parked(t, failures, len(poison))); !containsAll(ids, poison) {
				t.Errorf("parked %q, want the poison records answered done: %q", ids, poison)
			}
			outMu.Lock()
			output := out.String()
			outMu.Unlock()
			if strings.Contains(output, "WARNING: DATA RACE") {
				t.Errorf("the race detector reported a race:\n%s", output[strings.Index(output, "WARNING: DATA RACE"):])
			}
			if rt.Starts() < 2 || exited == 0 {
				t.Errorf("%d processes started, %d invokes lost with one: the crash tested nothing", rt.Starts(), exited)
			}
			t.Logf("%d batches, 8 at once: %d records reported failed, %d invokes lost with the crashed process, %d poison parked, %d processes",
				batches, reported, exited, len(poison), rt.Starts())
		})
	}
}

// sqsBatch is batch i of the SQS function: three messages of two keys
// each, the second of every tenth batch poison (no entity).
func sqsBatch(ns string, i int) (any, []concurrentRecord) {
	var ev lambdaevent.SQSEvent
	var recs []concurrentRecord
	for j := range 3 {
		id := fmt.Sprintf("m%d-%d", i, j)
		r := concurrentRecord{id: id, keys: []string{"cache:product:" + ns + id, "cache:category:" + ns + id}}
		body, _ := json.Marshal(map[string]any{"keys": r.keys})
		if i%10 == 0 && j == 1 {
			r.poison, body = true, []byte(`{"id":"`+id+`"}`)
		}
		ev.Records = append(ev.Records, sqsMessage(id, string(body)))
		recs = append(recs, r)
	}
	return ev, recs
}

// streamBatch is batch i of the stream function: three inserts of a
// product, each its product's and its category's keys; the second of
// every tenth batch has no category, which the rules need.
func streamBatch(ns string, i int) (any, []concurrentRecord) {
	var ev lambdaevent.DynamoDBEvent
	var recs []concurrentRecord
	for j := range 3 {
		seq := strconv.Itoa(100*i + 10*j + 10)
		id := ns + seq
		r := concurrentRecord{id: seq, keys: []string{"cache:product:" + id, "cache:category:c" + id}}
		image := item(id, "c"+id)
		if i%10 == 0 && j == 1 {
			r.poison, image = true, events.Image{"id": attr(id)}
		}
		ev.Records = append(ev.Records, streamRecord(seq, "INSERT", id, nil, image))
		recs = append(recs, r)
	}
	return ev, recs
}

// failedIDs are a batch's records reported failed: all of them when the
// invoke failed; else those its answer names — on a stream, every record
// from the lowest it names, which Lambda retries from.
func failedIDs(t *testing.T, name string, resp []byte, err error, recs []concurrentRecord) map[string]bool {
	out := map[string]bool{}
	if err != nil {
		var fe *runtimeapi.FunctionError
		if !errors.As(err, &fe) {
			t.Errorf("an invoke failed otherwise than as Lambda reports it: %v", err)
		}
		for _, r := range recs {
			out[r.id] = true
		}
		return out
	}
	var answer struct {
		Failures []struct {
			ID string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(resp, &answer); err != nil {
		t.Errorf("answer %s: %v", resp, err)
	}
	lowest := -1
	for _, f := range answer.Failures {
		out[f.ID] = true
		if n, err := strconv.Atoi(f.ID); err == nil && (lowest < 0 || n < lowest) {
			lowest = n
		}
	}
	if name == "stream-invalidate" && lowest >= 0 {
		for _, r := range recs {
			if n, _ := strconv.Atoi(r.id); n >= lowest {
				out[r.id] = true
			}
		}
	}
	return out
}

// killConnections kills user's connections on every node of c every
// 300 ms until ctx ends, as a node's restart or a network cut would.
func killConnections(ctx context.Context, t *testing.T, c valkey.Client, user string) {
	for tick := time.NewTicker(300 * time.Millisecond); ; {
		select {
		case <-ctx.Done():
			tick.Stop()
			return
		case <-tick.C:
		}
		for addr, node := range c.Nodes() {
			if err := node.Do(ctx, node.B().Arbitrary("CLIENT", "KILL", "USER", user).Build()).Error(); err != nil && ctx.Err() == nil && !valkey.IsValkeyNil(err) {
				t.Logf("CLIENT KILL on %s: %v", addr, err)
			}
		}
	}
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// lockedWriter is a writer many goroutines share.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
