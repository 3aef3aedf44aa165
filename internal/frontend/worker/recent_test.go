package worker

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/localstack/fakes"
)

// newRecent is a window of 10 s; the tests that move its time run in a
// synctest bubble, where time.Sleep moves the clock at once.
func newRecent(maxBytes int) *Recent { return NewRecent(10*time.Second, maxBytes, false) }

// failedKeys remembers a batch whose keys failed.
func failedKeys(r *Recent, keys ...string) { remembered(r, invalidate.KeyFailed, keys...) }

// succeeded remembers a batch whose keys were deleted.
func succeeded(r *Recent, keys ...string) { remembered(r, invalidate.KeyDeleted, keys...) }

func remembered(r *Recent, status invalidate.KeyStatus, keys ...string) {
	var res invalidate.Result
	for _, k := range keys {
		res.Keys = append(res.Keys, invalidate.KeyResult{Key: k, Status: status})
	}
	r.remember(invalidate.Report{Results: []invalidate.Result{res}})
}

func started(r *Recent) {
	r.Connected("127.0.0.1:7001") // the seed, before the client exists
	r.Started([]string{"127.0.0.1:7001", "127.0.0.1:7002"})
	r.Connected("127.0.0.1:7002") // the first connection to a known node
}

// TestARecentWindowRedeletesWhatItsReplicaMayLack: a reconnect asks for the
// keys done within the window before the cache last answered — not those
// before, not failed ones — however long the process was frozen since.
func TestARecentWindowRedeletesWhatItsReplicaMayLack(t *testing.T) {
	synctest.Test(t, testRecentWindow)
}

func testRecentWindow(t *testing.T) {
	r := newRecent(1 << 20)
	started(r)
	if _, ok := r.take(); ok {
		t.Fatal("the first connections asked for a re-delete")
	}
	succeeded(r, "old")
	time.Sleep(15 * time.Second)
	succeeded(r, "a", "b")
	failedKeys(r, "failed")
	time.Sleep(5 * time.Second)
	succeeded(r, "c", "a")
	time.Sleep(time.Hour) // frozen, the cache gone and back
	r.Connected("127.0.0.1:7001")
	rd, ok := r.take()
	if !ok || !slices.Equal(rd.keys, []string{"a", "b", "c"}) || !strings.Contains(rd.cause, "reconnected to 127.0.0.1:7001") {
		t.Fatalf("re-delete %+v (%v), want a, b, c once each, for the reconnect", rd, ok)
	}
	if _, ok := r.take(); ok {
		t.Fatal("one reconnect asked twice")
	}
}

// TestOnlyReconnectsAndNewNodesAskForARedelete: a first connection to a node
// of the start asks for nothing; one to a new node only when told to.
func TestOnlyReconnectsAndNewNodesAskForARedelete(t *testing.T) {
	for _, newNodes := range []bool{false, true} {
		r := NewRecent(10*time.Second, 1<<20, newNodes)
		started(r)
		succeeded(r, "k")
		r.Connected("127.0.0.1:7003") // a promoted replica of a node-based cluster
		if _, ok := r.take(); ok != newNodes {
			t.Errorf("newNodes %v: a new node asked for a re-delete: %v", newNodes, ok)
		}
	}
}

// TestAFullWindowSaysSo: keys that leave the window for its size before
// their time are reported.
func TestAFullWindowSaysSo(t *testing.T) {
	r := newRecent(2*keyBytes("a") + 4*slotBytes) // two keys, in a slice grown to four slots
	started(r)
	succeeded(r, "a", "b", "c")
	r.Connected("127.0.0.1:7001")
	if rd, _ := r.take(); !rd.truncated || !slices.Equal(rd.keys, []string{"b", "c"}) {
		t.Fatalf("re-delete %+v: want the last two keys, truncated", rd)
	}
}

// reconnecting is a worker on cache with a re-delete window, its connection
// started; handle has it take one SQS message of body.
func reconnecting(t *testing.T, cache *cachetest.Cache, logs io.Writer) (*Recent, func(body string)) {
	recent := NewRecent(time.Minute, 1<<20, true)
	started(recent)
	inv := invalidate.New(cache, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	w := New(inv, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: io.Discard, DeadlineMargin: 100 * time.Millisecond, Recent: recent})
	queues := &fakes.SQS{}
	return recent, func(body string) {
		t.Helper()
		payload, _ := received(t, queues, body)
		if _, err := outcomeOf(w.Lambda(deadline(t), events.SourceSQS, payload)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestABatchAfterAReconnectDeletesAgain: the batch that follows a reconnect
// deletes the window's keys again and says so; a re-delete that fails for
// now is tried again with the next batch.
func TestABatchAfterAReconnectDeletesAgain(t *testing.T) {
	var logs bytes.Buffer
	down := false
	cache := &cachetest.Cache{Fail: func(key string, _ int) error {
		if down && key == "cache:user:1" {
			return cachetest.ErrRefused
		}
		return nil
	}}
	recent, handle := reconnecting(t, cache, &logs)
	handle(`{"entity":"user","id":"1"}`)
	recent.Connected("127.0.0.1:7002") // the connection dropped and made again: a failover
	down = true
	handle(`{"entity":"user","id":"2"}`)
	if n := cache.Attempts("cache:user:1"); n < 2 {
		t.Fatalf("cache:user:1 sent %d times, want it deleted again after the reconnect", n)
	}
	if !strings.Contains(logs.String(), `"msg":"keys deleted again after a reconnect: a failover may have lost deletes"`) ||
		!strings.Contains(logs.String(), `"fate":"retry"`) {
		t.Fatalf("no line of the failed re-delete:\n%s", logs.String())
	}
	down = false
	before := cache.Attempts("cache:user:1")
	logs.Reset()
	handle(`{"entity":"user","id":"3"}`)
	// Again: the key that failed, and the two deleted since.
	if cache.Attempts("cache:user:1") == before || !strings.Contains(logs.String(), `"again_reconnect_keys":3`) {
		t.Fatalf("the failed re-delete was not tried again with the next batch:\n%s", logs.String())
	}
}

// TestARedeleteThatFailsForGoodIsNotAskedAgain: a key the cache refuses
// for good (NOPERM) fails the re-delete that one time: it is logged, and
// the batches after it do not delete the window again, nor keep it from
// ageing.
func TestARedeleteThatFailsForGoodIsNotAskedAgain(t *testing.T) {
	var logs bytes.Buffer
	refused := false
	cache := &cachetest.Cache{Fail: func(key string, _ int) error {
		if refused && key == "cache:user:1" {
			return cachetest.ErrNoPerm
		}
		return nil
	}}
	recent, handle := reconnecting(t, cache, &logs)
	handle(`{"entity":"user","id":"1"}`)
	recent.Connected("127.0.0.1:7002")
	refused = true // an ACL changed meanwhile
	handle(`{"entity":"user","id":"2"}`)
	if !strings.Contains(logs.String(), `"fate":"failed for good"`) {
		t.Fatalf("no line of the re-delete that failed for good:\n%s", logs.String())
	}
	before := cache.Attempts("cache:user:1")
	logs.Reset()
	for id := range 3 {
		handle(`{"entity":"user","id":"` + strconv.Itoa(10+id) + `"}`)
	}
	if n := cache.Attempts("cache:user:1") - before; n != 0 || strings.Contains(logs.String(), "keys deleted again") {
		t.Fatalf("cache:user:1 sent %d more times by the batches after:\n%s", n, logs.String())
	}
}

// TestAReconnectInvalidatesTagsAgain: the tags invalidated within the
// window are invalidated again after a reconnect, so that an entry whose
// invalidation the failover lost, registered in them, goes.
func TestAReconnectInvalidatesTagsAgain(t *testing.T) {
	var logs logLines
	cache := &cachetest.Cache{}
	cache.Tag("cache:tag:category:a", "cache:list:1")
	recent, handle := reconnecting(t, cache, &logs)
	handle(`{"tags":["category:a"]}`)
	cache.Tag("cache:tag:category:a", "cache:list:1") // the failover brings it back
	recent.Connected("127.0.0.1:7002")
	logs.Reset()
	handle(`{"entity":"user","id":"2"}`)
	if left := cache.Members("cache:tag:category:a"); len(left) != 0 || !strings.Contains(logs.String(), `"tags":1`) {
		t.Fatalf("after the reconnect the tag holds %q:\n%s", left, logs.String())
	}
}

// TestTheWindowIsBoundedInBytes: keys short and long — 1 KiB, the
// longest the rules allow by default — fill the window to its byte budget
// and no further: the process's heap grows by at most the budget, however
// many keys pass.
func TestTheWindowIsBoundedInBytes(t *testing.T) {
	const budget = 4 << 20
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, size := range []int{26, 100, 1000, invalidate.DefaultRules().MaxKeyBytes(), 1100} {
		before := heap()
		r := NewRecent(time.Hour, budget, false)
		status := make([]invalidate.KeyStatus, 500)
		for i := range status {
			status[i] = invalidate.KeyDeleted
		}
		keys := make([]string, 500)
		pad := strings.Repeat("k", size-15)
		for range 2 * budget / size / len(keys) { // two budgets' worth
			for i := range keys {
				keys[i] = "cache:" + strconv.Itoa(int(1e7+rand.Int64N(9e7))) + ":" + pad
			}
			r.add(keys, false)
		}
		clear(keys)
		grew := int64(heap()) - int64(before)
		held := len(r.done) - r.head
		if grew > budget+budget/50 || held < budget/2/(size+64) { // 2 %: the test's own allocations
			t.Errorf("%d keys of %d bytes in %.1f MiB of heap: want at most the budget's %d MiB, and at least half of it", held, size, float64(grew)/(1<<20), budget>>20)
		}
		t.Logf("%d keys of %d bytes in %.3f MiB of heap, %.0f bytes each; budget %d MiB", held, size, float64(grew)/(1<<20), float64(grew)/float64(held), budget>>20)
		runtime.KeepAlive(r)
	}
}

// TestAFullWindowIsDeletedAgainInChunks: a re-delete of more keys than a
// chunk, and tags, deletes each once.
func TestAFullWindowIsDeletedAgainInChunks(t *testing.T) {
	cache := &cachetest.Cache{}
	recent := NewRecent(time.Minute, 16<<20, true)
	started(recent)
	inv := invalidate.New(cache, invalidate.Options{})
	w := New(inv, Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, Recent: recent})
	keys := make([]string, 2*redeleteChunk+1)
	status := make([]invalidate.KeyStatus, len(keys))
	for i := range keys {
		keys[i], status[i] = fmt.Sprintf("cache:k:%d", i), invalidate.KeyDeleted
	}
	recent.add(keys, false)
	recent.add(keys[:10], false) // done twice: deleted again once
	recent.add([]string{"a", "b"}, true)
	recent.Connected("127.0.0.1:7001")
	if n := w.redelete(t.Context()); n.keys != len(keys) {
		t.Fatalf("%d keys deleted again, want %d", n.keys, len(keys))
	}
	for _, k := range append(keys[:1], keys[len(keys)-1], "cache:tag:b") {
		if n := cache.Attempts(k); n != 1 {
			t.Fatalf("%s deleted again %d times, want once", k, n)
		}
	}
}

// BenchmarkRedeleteFullWindow fills a window of the default size with
// short keys and with the longest the rules allow by default, then
// deletes it all again after a reconnect, against a cache that keeps
// nothing: the heap the window holds, and the peak of the heap in use
// while the re-delete runs (sampled every millisecond; lower GOGC to see
// what is live rather than what the collector lets grow).
func BenchmarkRedeleteFullWindow(b *testing.B) {
	for _, size := range []int{26, invalidate.DefaultRules().MaxKeyBytes()} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			heap := func() runtime.MemStats {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return m
			}
			for range b.N {
				base := heap().HeapAlloc
				recent := NewRecent(time.Hour, defaultRedeleteMaxBytes, true)
				started(recent)
				w := New(invalidate.New(&cachetest.Cache{Forgetful: true}, invalidate.Options{}), Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, Recent: recent})
				keys, status := make([]string, 1000), make([]invalidate.KeyStatus, 1000)
				for n := 0; recent.keyBytes+cap(recent.done)*slotBytes < defaultRedeleteMaxBytes-2*len(keys)*(size+64); {
					for i := range keys {
						keys[i], status[i] = fmt.Sprintf("cache:%012d:", n)+strings.Repeat("k", size-19), invalidate.KeyDeleted
						n++
					}
					recent.add(keys, false)
				}
				clear(keys)
				full := heap()
				recent.Connected("127.0.0.1:7001")
				var peak uint64
				stop, sampled := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(sampled)
					for {
						select {
						case <-stop:
							return
						case <-time.After(time.Millisecond):
						}
						var m runtime.MemStats
						runtime.ReadMemStats(&m)
						peak = max(peak, m.HeapInuse)
					}
				}()
				n := w.redelete(b.Context())
				close(stop)
				<-sampled
				b.ReportMetric(float64(n.keys), "keys")
				b.ReportMetric(float64(full.HeapAlloc-base)/(1<<20), "window-MiB")
				b.ReportMetric(float64(peak-base)/(1<<20), "redelete-peak-MiB")
				b.ReportMetric(float64(heap().Sys)/(1<<20), "sys-MiB")
			}
		})
	}
}
