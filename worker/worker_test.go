package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
)

func TestEMFLine(t *testing.T) {
	var buf bytes.Buffer
	m := invalidate.Metrics{Records: 10, Failed: 2, KeysDeleted: 7, KeysAbsent: 3, KeysFailed: 1, MaxLag: 1500 * time.Millisecond,
		TagsInvalidated: 6, TagsFailed: 1, TagEntriesDeleted: 900}
	// The function name is escaped as JSON wants, whatever it holds.
	function := "sqs-\"invalidate\"\\\n\x01é"
	announced := announcements{messages: 1, failed: 2, took: 20 * time.Millisecond}
	started := time.UnixMilli(1795953600000)
	st := stagesOf(started, started.Add(100*time.Millisecond), started.Add(250*time.Millisecond), m, announced.took)
	figs := append(figures(m, 1, scheduled{keys: 5}, announced, true), st.figures(true)...)
	if err := writeEMF(&buf, "Invalidator", function, "req-1", events.SourceSQS, "", figs, time.UnixMilli(1795953600000)); err != nil {
		t.Fatal(err)
	}
	var line struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function, Source                                                                   string
		RequestID                                                                          string `json:"request_id"`
		Records, FailedRecords, ParkedRecords, KeysDeleted, KeysAbsent, KeysFailed, MaxLag int64
		AgainScheduled                                                                     int64
		Announcements, AnnounceFailedKeys                                                  int64
		TagsInvalidated, TagsFailed, TagEntriesDeleted                                     int64
		MaxAge, PlanTime, DeleteTime, AnnounceTime, AnswerTime                             int64
	}
	if !strings.HasSuffix(buf.String(), "}\n") || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("want one JSON line, got %q", buf.String())
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	cw := line.AWS.CloudWatchMetrics
	if line.AWS.Timestamp != 1795953600000 || len(cw) != 1 || cw[0].Namespace != "Invalidator" ||
		len(cw[0].Dimensions) != 1 || strings.Join(cw[0].Dimensions[0], ",") != "Function,Source" {
		t.Fatalf("EMF metadata = %+v", line.AWS)
	}
	// Every declared metric must be a top-level member, or CloudWatch drops it.
	var members map[string]any
	_ = json.Unmarshal(buf.Bytes(), &members)
	for _, metric := range cw[0].Metrics {
		if _, ok := members[metric.Name]; !ok {
			t.Errorf("metric %s declared but missing", metric.Name)
		}
		timed := strings.HasSuffix(metric.Name, "Time") || strings.HasPrefix(metric.Name, "Max")
		if want := map[bool]string{true: "Milliseconds", false: "Count"}[timed]; metric.Unit != want {
			t.Errorf("metric %s in %s, want %s", metric.Name, metric.Unit, want)
		}
	}
	// The lag, 1.5 s at the deletes, 100 ms after the batch began: the oldest
	// change was 1.4 s old then; of the 100 ms, 20 announcing (the longer of
	// the two announcements, made side by side), the rest deleting.
	if line.MaxAge != 1400 || line.PlanTime != 0 || line.DeleteTime != 80 || line.AnnounceTime != 20 || line.AnswerTime != 150 {
		t.Errorf("stages = age %d, plan %d, delete %d, announce %d, answer %d ms", line.MaxAge, line.PlanTime, line.DeleteTime, line.AnnounceTime, line.AnswerTime)
	}
	if line.Records != 10 || line.FailedRecords != 2 || line.ParkedRecords != 1 || line.KeysDeleted != 7 || line.KeysAbsent != 3 || line.KeysFailed != 1 ||
		line.MaxLag != 1500 || line.AgainScheduled != 5 || line.Announcements != 1 || line.AnnounceFailedKeys != 2 ||
		line.Function != function || line.Source != "sqs" ||
		line.RequestID != "req-1" || line.TagsInvalidated != 6 || line.TagsFailed != 1 || line.TagEntriesDeleted != 900 {
		t.Fatalf("values = %+v", line)
	}
	// Without tags in the batch nor announcements, their figures take no bytes.
	buf.Reset()
	if err := writeEMF(&buf, "Invalidator", "f", "", events.SourceSQS, "", figures(invalidate.Metrics{Records: 1}, 0, scheduled{}, announcements{}, false), time.Now()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Tag") || strings.Contains(buf.String(), "Announce") {
		t.Fatalf("a line of a batch without tags or announcements: %s", buf.String())
	}
	// What is deleted again has a line per cause, the cause a dimension.
	buf.Reset()
	if err := writeEMF(&buf, "Invalidator", "f", "", events.SourceSQS, causeFailover, again{cause: causeFailover, keys: 4, refills: 3}.figures(), time.Now()); err != nil {
		t.Fatal(err)
	}
	var again struct {
		AWS struct {
			CloudWatchMetrics []struct{ Dimensions [][]string }
		} `json:"_aws"`
		Cause                           string
		KeysDeletedAgain, RefillsCaught int64
	}
	if err := json.Unmarshal(buf.Bytes(), &again); err != nil || again.Cause != "failover" || again.KeysDeletedAgain != 4 || again.RefillsCaught != 3 ||
		len(again.AWS.CloudWatchMetrics) != 1 || !slices.Equal(again.AWS.CloudWatchMetrics[0].Dimensions[0], []string{"Function", "Source", "Cause"}) {
		t.Fatalf("the line of a re-delete: %s (%v)", buf.String(), err)
	}
}

// TestSQSHandlerInProcess runs the SQS handler as Lambda would, and checks
// its log lines: one per failed record, one per batch, no bodies.
func TestSQSHandlerInProcess(t *testing.T) {
	var logs, metrics bytes.Buffer
	w := New(invalidate.New(&cachetest.Cache{}, invalidate.Options{}), Options{
		Name: "sqs-invalidate", Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: &metrics,
	})
	secret := "do-not-log-this-body"
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	payload, err := json.Marshal(lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{
		{MessageId: "ok", Body: `{"entity":"user","id":"1"}`},
		{MessageId: "bad", Body: `{"entity":"user","id":"1","` + secret + `":` + strings.Repeat("[", 3)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := answerOf(w.Lambda(ctx, events.SourceSQS, payload))
	if err != nil || len(resp.Retry) != 1 || resp.Retry[0].Record != "bad" {
		t.Fatalf("response = %+v, %v; want exactly the bad message", resp, err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"record failed"`) || !strings.Contains(lines[1], `"msg":"batch"`) {
		t.Fatalf("log lines = %q", lines)
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatal("a message body reached the logs")
	}
	if strings.Count(metrics.String(), "\n") != 1 {
		t.Fatalf("want one EMF line per invoke, got %q", metrics.String())
	}
}

// TestSQSPayloads: a payload that is not an SQS event fails the invoke, to
// be retried whole; a record that is broken fails alone, by its message ID.
func TestSQSPayloads(t *testing.T) {
	w := New(invalidate.New(&cachetest.Cache{}, invalidate.Options{}), Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard})
	for _, payload := range []string{``, `[]`, `{"Records":{}}`, `{"Records":[{"messageId":"1","body":"{}"}]`} {
		if resp, err := w.Lambda(t.Context(), events.SourceSQS, []byte(payload)); err == nil {
			t.Errorf("payload %q: response %+v, want an error", payload, resp)
		}
	}
	resp, err := answerOf(w.Lambda(t.Context(), events.SourceSQS, []byte(`{"Records":[{"messageId":"fine","body":"{\"entity\":\"user\",\"id\":\"7\"}"},`+
		`{"body":7,"messageId":"no-body"},{"messageId":"bad-body","body":"{\"entity\":"},{"messageId":"empty-body","attributes":{"SentTimestamp":"1"},"body":""}]}`)))
	var failed []string
	for _, f := range resp.Retry {
		failed = append(failed, f.Record)
	}
	if err != nil || !slices.Equal(failed, []string{"no-body", "bad-body", "empty-body"}) {
		t.Fatalf("failed %q (%v), want no-body, bad-body and empty-body", failed, err)
	}
}

func TestHandleStopsBeforeTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		left, margin, want time.Duration
	}{
		{left: 3 * time.Second, margin: time.Second, want: time.Second},
		{left: 400 * time.Millisecond, margin: time.Second, want: 200 * time.Millisecond}, // never more than half
	} {
		var seen time.Time
		// The deadline the deletes were sent under.
		inv := invalidate.New(&cachetest.Cache{Unlinked: func(ctx context.Context, _ []string) { seen, _ = ctx.Deadline() }}, invalidate.Options{})
		w := New(inv, Options{DeadlineMargin: tc.margin, Metrics: &bytes.Buffer{}, Logger: slog.New(slog.DiscardHandler)})
		deadline := time.Now().Add(tc.left)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		w.Handle(ctx, events.SourceSQS, invalidate.Decoded([]invalidate.Record{{ID: "1", Changes: []events.Change{{Entity: "user", ID: "1"}}}}), nil)
		cancel()
		// The attempt's own timeout is longer: the deadline seen is the batch's.
		if got := deadline.Sub(seen); got < tc.want-50*time.Millisecond || got > tc.want+50*time.Millisecond {
			t.Errorf("%v left, margin %v: deletes stopped %v before the deadline, want %v", tc.left, tc.margin, got, tc.want)
		}
	}
}
