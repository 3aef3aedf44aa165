package worker

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// TestAnInvocationNamesEveryLineAndParkedRecord: the lines of a batch
// handled under an invocation, the failed record's, the batch's and the
// EMF line, carry its request ID and trace; the record it parks carries
// the request ID.
func TestAnInvocationNamesEveryLineAndParkedRecord(t *testing.T) {
	var logs, metrics bytes.Buffer
	sqsFake := &queuestest.SQS{}
	w := testWorker(nil, sqsFake)
	w.opts.Logger, w.opts.Metrics = NewLogger(&logs, slog.LevelInfo), &metrics
	payload, _ := received(t, sqsFake, `{"entity":"user","id":"1"}`, `{"entity":"user","id":`)
	inv := Invocation{RequestID: "8f1c-req", TraceID: "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"}
	if _, err := w.Lambda(WithInvocation(deadline(t), inv), events.SourceSQS, payload); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()+metrics.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want the failed record's, the batch's and the EMF line:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, line := range lines {
		var l struct {
			RequestID string `json:"request_id"`
			TraceID   string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.RequestID != inv.RequestID {
			t.Errorf("line %s (%v): want request_id %s", line, err, inv.RequestID)
		}
		if !strings.Contains(line, `"_aws"`) && l.TraceID != inv.TraceID {
			t.Errorf("line %s: want trace_id %s", line, inv.TraceID)
		}
	}
	if p := parked(t, sqsFake); len(p) != 1 || p[0].RequestID != inv.RequestID {
		t.Fatalf("parked %+v: want the record, with the invoke's request ID", p)
	}
}

// TestWithoutAnInvocationLinesNameNone: the poller's lines have no
// request_id member at all, not an empty one.
func TestWithoutAnInvocationLinesNameNone(t *testing.T) {
	var logs bytes.Buffer
	NewLogger(&logs, slog.LevelInfo).InfoContext(t.Context(), "batch")
	if strings.Contains(logs.String(), "request_id") || strings.Contains(logs.String(), "trace_id") {
		t.Fatalf("line %s: want no invocation members", logs.String())
	}
}
