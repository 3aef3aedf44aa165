package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/localstack/rie"
)

// logMeter reads a worker's output as CloudWatch Logs would take it in:
// the bytes of its lines (the emulator's own "(rapid)" lines are not
// Lambda's and are left out; START, END and REPORT are), the durations of
// the REPORT lines, and the sums of the batch lines.
type logMeter struct {
	mu      sync.Mutex
	partial []byte
	bytes   int
	reports []float64 // REPORT Duration, in ms, in order
	batches batchSums
}

// batchSums add up the worker's batch log lines.
type batchSums struct {
	Records         int `json:"records"`
	Failed          int `json:"failed"`
	KeysDeleted     int `json:"keys_deleted"`
	KeysAbsent      int `json:"keys_absent"`
	Scheduled       int `json:"again_scheduled"`
	SecondDeleteKey int `json:"again_delayed_keys"`
	FailoverKey     int `json:"again_failover_keys"`
}

func (m *logMeter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.partial = append(m.partial, p...)
	for {
		i := bytes.IndexByte(m.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		m.line(m.partial[:i])
		m.partial = m.partial[i+1:]
	}
}

func (m *logMeter) line(l []byte) {
	if bytes.Contains(l, []byte("(rapid)")) {
		return
	}
	m.bytes += len(l) + 1
	if bytes.Contains(l, []byte(`"level":"WARN"`)) || bytes.Contains(l, []byte(`"level":"ERROR"`)) {
		log.Printf("cost: %s", l) // a cell that went wrong says why
	}
	if rest, ok := bytes.CutPrefix(l, []byte("REPORT RequestId:")); ok {
		_, d, _ := strings.Cut(string(rest), "\tDuration: ")
		d, _, _ = strings.Cut(d, " ms")
		if ms, err := strconv.ParseFloat(d, 64); err == nil {
			m.reports = append(m.reports, ms)
		}
		return
	}
	if bytes.Contains(l, []byte(`"msg":"batch"`)) {
		var b batchSums
		if json.Unmarshal(l, &b) == nil {
			m.batches.Records += b.Records
			m.batches.Failed += b.Failed
			m.batches.KeysDeleted += b.KeysDeleted
			m.batches.KeysAbsent += b.KeysAbsent
			m.batches.Scheduled += b.Scheduled
			m.batches.SecondDeleteKey += b.SecondDeleteKey
			m.batches.FailoverKey += b.FailoverKey
		}
	}
}

// reset forgets what was read so far: a warm-up's lines.
func (m *logMeter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bytes, m.reports, m.batches = 0, nil, batchSums{}
}

func (m *logMeter) sums() (batchSums, int, []float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.batches, m.bytes, append([]float64(nil), m.reports...)
}

// meter is one function under the emulator, invoked through it, that
// counts what each invoke uses: the emulator's Duration and the CPU time
// of the function's process from this invoke's start to the next one's
// (work after the response is billed until the runtime asks for the next
// event), its SQS requests, its log lines. It is an esm.Invoker.
type meter struct {
	fn   *rie.Emulator
	pid  int
	sqs  *apiCounter // the function's own SQS client
	logs *logMeter
	mu   sync.Mutex
	// starts are each invoke's CPU time and SQS requests so far at its
	// start, and a last one when the cell ends.
	starts []usage
	// cold is the first invoke — init and handler — timed from outside,
	// and the CPU time it took.
	cold, coldCPU time.Duration
}

type usage struct {
	cpu time.Duration
	sqs int
}

// startMeter starts bootstrap under a new emulator and warms it up with
// one invoke of warm, which is timed as its cold start and then forgotten.
func startMeter(bootstrap string, env []string, sqs *apiCounter, warm any) (*meter, error) {
	logs := &logMeter{}
	fn, err := rie.Start(bootstrap, rie.Options{Env: env, Output: logs})
	if err != nil {
		return nil, err
	}
	m := &meter{fn: fn, sqs: sqs, logs: logs}
	start := time.Now()
	_, err = fn.Invoke(context.Background(), warm)
	m.cold = time.Since(start)
	if err != nil {
		var fe *rie.FunctionError
		if !errors.As(err, &fe) { // a function's error still warms it up
			fn.Stop()
			return nil, fmt.Errorf("warm-up of %s: %w", bootstrap, err)
		}
	}
	if m.pid, err = fn.FunctionPID(); err != nil {
		fn.Stop()
		return nil, err
	}
	// The connection to the cache is made in the background at init:
	// let it end before the invokes are counted.
	time.Sleep(300 * time.Millisecond)
	m.coldCPU = threadsCPU(m.pid)
	waitFor("the warm-up's REPORT line", 5*time.Second, func() bool { _, _, r := logs.sums(); return len(r) > 0 })
	logs.reset()
	return m, nil
}

func (m *meter) now() usage {
	u := usage{cpu: threadsCPU(m.pid)}
	if m.sqs != nil {
		for _, n := range m.sqs.counts().Calls {
			u.sqs += n
		}
	}
	return u
}

func (m *meter) Invoke(ctx context.Context, ev any) ([]byte, error) {
	m.mu.Lock()
	m.starts = append(m.starts, m.now())
	m.mu.Unlock()
	return m.fn.Invoke(ctx, ev)
}

// invokeUse is what one invoke used.
type invokeUse struct {
	ms  float64 // the emulator's Duration
	cpu time.Duration
	sqs int
}

// finish waits for the REPORT line of every invoke, stops the emulator and
// returns each invoke's use.
func (m *meter) finish() ([]invokeUse, batchSums, int) {
	m.mu.Lock()
	starts := append(m.starts, m.now())
	m.mu.Unlock()
	n := len(starts) - 1
	waitFor("a REPORT line for each invoke", 10*time.Second, func() bool { _, _, r := m.logs.sums(); return len(r) >= n })
	m.fn.Stop()
	b, logBytes, reports := m.logs.sums()
	uses := make([]invokeUse, n)
	for i := range uses {
		uses[i] = invokeUse{ms: reports[i], cpu: starts[i+1].cpu - starts[i].cpu, sqs: starts[i+1].sqs - starts[i].sqs}
	}
	return uses, b, logBytes
}
