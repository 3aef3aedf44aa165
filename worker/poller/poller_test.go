package poller

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

func TestOptionsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := OptionsFromEnv(env(map[string]string{"QUEUE_URL": "https://sqs/q"}))
	if err != nil || o.Receivers != 2 || o.MaxReceivers != 8 || o.MaxMessages != 10 || o.WaitTime != 20*time.Second ||
		o.VisibilityTimeout != 30*time.Second || o.BatchTimeout != time.Minute || o.StatsEvery != time.Minute || o.HealthAddr != ":8080" {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	// What a deployment does not choose is not read: the defaults stand.
	o, err = OptionsFromEnv(env(map[string]string{"QUEUE_URL": "q", "HEALTH_ADDR": "off", "POLLER_WAIT_TIME": "5s", "POLLER_MAX_MESSAGES": "1",
		"POLLER_RECEIVERS": "5", "POLLER_VISIBILITY_TIMEOUT": "2m", "POLLER_BATCH_TIMEOUT": "3s"}))
	if err != nil || o.HealthAddr != "" || o.WaitTime != 5*time.Second || o.MaxMessages != 1 ||
		o.Receivers != 2 || o.VisibilityTimeout != 30*time.Second || o.BatchTimeout != defaultBatchTimeout {
		t.Fatalf("options = %+v, %v", o, err)
	}
	for name, vars := range map[string]map[string]string{
		"QUEUE_URL":           {},
		"POLLER_MAX_MESSAGES": {"QUEUE_URL": "q", "POLLER_MAX_MESSAGES": "11"},
		"POLLER_WAIT_TIME":    {"QUEUE_URL": "q", "POLLER_WAIT_TIME": "21s"},
	} {
		if _, err := OptionsFromEnv(env(vars)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("bad %s: err = %v, want it named", name, err)
		}
	}
}

const (
	queue    = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation"
	failures = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-failures"
)

// cacheSwitch is a fake cache that is up or down.
type cacheSwitch struct{ down atomic.Bool }

func (c *cacheSwitch) fail(string, int) error {
	if c.down.Load() {
		return cachetest.ErrRefused
	}
	return nil
}

// concurrency counts the batches a handler works on at once; each takes at
// least slow, so that batches of receivers that run together overlap.
type concurrency struct {
	Handler
	slow      atomic.Int64
	now, peak atomic.Int32
	batches   atomic.Int32
}

func (c *concurrency) Handle(ctx context.Context, source events.Source, batch invalidate.Batch, delivered func(int) (events.Delivery, []byte)) worker.Outcome {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	c.batches.Add(1)
	time.Sleep(time.Duration(c.slow.Load()))
	return c.Handler.Handle(ctx, source, batch, delivered)
}

func run(t *testing.T, sqs *queuestest.SQS, cache *cacheSwitch, opts Options) (h *concurrency, stop func()) {
	t.Helper()
	inv := invalidate.New(&cachetest.Cache{Fail: cache.fail}, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	w := worker.New(inv, worker.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard,
		Park: failurequeue.Queue{Client: sqs, URL: failures}, Queues: sqs})
	h = &concurrency{Handler: w}
	opts.QueueURL, opts.Logger = queue, slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, sqs, h, opts) }()
	return h, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
	}
}

func TestPollerDeletesWhatIsDoneOrParkedAndHandsBackTheRest(t *testing.T) {
	sqs := &queuestest.SQS{}
	good, poison, later := sqs.Send(queue, `{"entity":"user","id":"1"}`), sqs.Send(queue, `{"entity":`), sqs.Send(queue, `{"entity":"down","id":"2"}`)
	inv := invalidate.New(&cachetest.Cache{Fail: func(key string, _ int) error {
		if strings.HasPrefix(key, "cache:down:") {
			return cachetest.ErrRefused
		}
		return nil
	}}, invalidate.Options{})
	w := worker.New(inv, worker.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, Park: failurequeue.Queue{Client: sqs, URL: failures}, Queues: sqs})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, sqs, w, Options{QueueURL: queue, Receivers: 1, WaitTime: time.Second, BatchTimeout: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	}()
	state := func() map[string]queuestest.Message {
		m := map[string]queuestest.Message{}
		for _, msg := range sqs.Messages(queue) {
			m[msg.ID] = msg
		}
		return m
	}
	eventually(t, "the good and the poison messages were not deleted", func() bool {
		s := state()
		return s[good].Deleted && s[poison].Deleted
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := sqs.Messages(failures); len(p) != 1 {
		t.Fatalf("failure queue %+v: want the poison message", p)
	} else if r, _, _ := failurequeue.Parse(p[0].Body, queues.Strings(p[0].Attributes)); r.ID != poison || string(r.Data) != `{"entity":` || r.SentAt.IsZero() {
		t.Fatalf("parked %+v: want the poison message's body as it came, and when it was sent", r)
	}
	m := state()[later]
	if m.Deleted || m.Receives == 0 {
		t.Fatalf("the message that failed for now: %+v, want it received and kept", m)
	}
	if back := time.Until(m.VisibleAt); back > 2*time.Second {
		t.Fatalf("it comes back in %v, want about a second, not the visibility timeout", back)
	}
}

// TestPollerStopsReceivingWhileTheCacheIsDown: four receivers; once
// batches show the cache down and a probe finds no node answering, nothing
// more is received — no batch, no receive count raised towards the DLQ —
// until the cache answers; then every receiver resumes and everything is
// done.
func TestPollerStopsReceivingWhileTheCacheIsDown(t *testing.T) {
	sqs := &queuestest.SQS{}
	cache := &cacheSwitch{}
	cache.down.Store(true)
	for i := range 40 {
		sqs.Send(queue, `{"entity":"user","id":"`+strconv.Itoa(i)+`"}`)
	}
	receives := func() (n int) {
		for _, m := range sqs.Messages(queue) {
			n += m.Receives
		}
		return n
	}
	h, stop := run(t, sqs, cache, Options{Receivers: 4, MaxMessages: 1, WaitTime: time.Second, BatchTimeout: 100 * time.Millisecond})
	defer stop()
	eventually(t, "no batch was tried", func() bool { return h.batches.Load() > 0 })
	eventually(t, "the receivers did not stop", func() bool { return h.now.Load() == 0 })
	batches, received := h.batches.Load(), receives()
	time.Sleep(time.Second)
	if h.batches.Load() != batches || receives() != received {
		t.Fatalf("%d batches and %d receives while the cache was down, then %d and %d: want none more",
			batches, received, h.batches.Load(), receives())
	}
	h.slow.Store(int64(50 * time.Millisecond))
	cache.down.Store(false)
	eventually(t, "not every message was done once the cache was back", func() bool {
		for _, m := range sqs.Messages(queue) {
			if !m.Deleted {
				return false
			}
		}
		return true
	})
	if p := h.peak.Load(); p < 2 {
		t.Fatalf("peak %d batches at once after the cache came back: the receivers did not resume", p)
	}
}

// TestOneNodeDownStopsNothing: a batch whose every record failed for now
// does not stop the receivers while the cache answers a probe.
func TestOneNodeDownStopsNothing(t *testing.T) {
	sqs := &queuestest.SQS{}
	for i := range 20 {
		sqs.Send(queue, `{"entity":"down","id":"`+strconv.Itoa(i)+`"}`)
	}
	inv := invalidate.New(&cachetest.Cache{Fail: func(key string, _ int) error {
		if strings.HasPrefix(key, "cache:down:") {
			return cachetest.ErrRefused // the keys of a node that is down; the probe's key answers
		}
		return nil
	}}, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	h := &concurrency{Handler: worker.New(inv, worker.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var logs testenv.Log
	go func() {
		done <- Run(ctx, sqs, h, Options{QueueURL: queue, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Receivers: 2, MaxMessages: 1,
			WaitTime: time.Second, BatchTimeout: 50 * time.Millisecond})
	}()
	defer func() {
		cancel()
		<-done
		if strings.Contains(logs.String(), "receiving stops") {
			t.Errorf("the receivers stopped while the cache answered:\n%s", logs.String())
		}
	}()
	sqs.Send(queue, `{"entity":"user","id":"fresh"}`)
	eventually(t, "a change on a node that is up waited behind those on the node down", func() bool {
		for _, m := range sqs.Messages(queue) {
			if strings.Contains(m.Body, "fresh") {
				return m.Deleted
			}
		}
		return false
	})
}

// TestPollerHandsBackWhatItReceivesWhileStopping: a message that a long
// poll in flight brings after the stop signal is not processed, and is
// visible again at once.
func TestPollerHandsBackWhatItReceivesWhileStopping(t *testing.T) {
	sqs := &queuestest.SQS{}
	h, stop := run(t, sqs, &cacheSwitch{}, Options{Receivers: 1, WaitTime: 2 * time.Second})
	time.Sleep(100 * time.Millisecond) // the receive is polling
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	time.Sleep(50 * time.Millisecond)
	id := sqs.Send(queue, `{"entity":"user","id":"1"}`)
	<-stopped
	msgs := sqs.Messages(queue)
	if len(msgs) != 1 || msgs[0].ID != id || msgs[0].Receives != 1 || msgs[0].Deleted || msgs[0].VisibleAt.After(time.Now()) || h.batches.Load() != 0 {
		t.Fatalf("message %+v, %d batches: want it received once, not handled, visible again", msgs, h.batches.Load())
	}
}

// TestPollerScalesWithABacklog: one steady receiver, but full receives
// start more, up to MaxReceivers, while the backlog lasts.
func TestPollerScalesWithABacklog(t *testing.T) {
	sqs := &queuestest.SQS{}
	for i := range 300 {
		sqs.Send(queue, `{"entity":"user","id":"`+strconv.Itoa(i)+`"}`)
	}
	h, stop := run(t, sqs, &cacheSwitch{}, Options{Receivers: 1, MaxReceivers: 4, WaitTime: time.Second})
	defer stop()
	h.slow.Store(int64(20 * time.Millisecond))
	eventually(t, "the backlog was not done", func() bool {
		for _, m := range sqs.Messages(queue) {
			if !m.Deleted {
				return false
			}
		}
		return true
	})
	if p := h.peak.Load(); p < 2 || p > 4 {
		t.Fatalf("peak %d batches at once, want more than the one steady receiver and at most 4", p)
	}
}

// TestPollerReceivesBesideAHeldBatch: one steady receiver holds a batch
// whose key cannot be deleted yet (its node down); a change sent meanwhile
// is received by another loop and done before the held batch ends.
func TestPollerReceivesBesideAHeldBatch(t *testing.T) {
	sqs := &queuestest.SQS{}
	var up atomic.Bool
	inv := invalidate.New(&cachetest.Cache{Fail: func(key string, _ int) error {
		if strings.HasPrefix(key, "cache:held:") && !up.Load() {
			return cachetest.ErrRefused
		}
		return nil
	}}, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	w := worker.New(inv, worker.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, RetryFor: time.Minute})
	h := &concurrency{Handler: w}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, sqs, h, Options{QueueURL: queue, Receivers: 1, MaxReceivers: 2, WaitTime: time.Second, Logger: slog.New(slog.DiscardHandler)})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	defer up.Store(true)
	sqs.Send(queue, `{"entity":"held","id":"1"}`)
	eventually(t, "the held batch did not start", func() bool { return h.now.Load() == 1 })
	fresh := sqs.Send(queue, `{"entity":"user","id":"2"}`)
	eventually(t, "the fresh change waited for the held batch", func() bool {
		for _, m := range sqs.Messages(queue) {
			if m.ID == fresh {
				return m.Deleted
			}
		}
		return false
	})
}
