package hostile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
)

// templatesThatMultiply: rules of 5,000 templates over a set, and one
// stream record whose set has 1,000 members — 5,000,000 keys, 1,167 MB
// allocated in 2.6 s before a record planned at most 50,000 (issue 38,
// finding 2) — is parked within a second, in what a 128 MB function has.
func templatesThatMultiply(t *testing.T) {
	templates := make([]string, 5000)
	for i := range templates {
		templates[i] = fmt.Sprintf(`"cache:t%d:{item.s}"`, i)
	}
	rules, err := invalidate.ParseRules([]byte("tables: {T: [" + strings.Join(templates, ",") + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	members := make([]string, 1000)
	for i := range members {
		members[i] = fmt.Sprintf(`"m%d"`, i)
	}
	image := `{"id":{"S":"1"},"s":{"SS":[` + strings.Join(members, ",") + `]}}`
	payload := []byte(`{"Records":[{"eventID":"1","eventName":"MODIFY","eventSource":"aws:dynamodb",` +
		`"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/T/stream/2026-01-01T00:00:00.000",` +
		`"dynamodb":{"Keys":{"id":{"S":"1"}},"OldImage":` + image + `,"NewImage":` + image +
		`,"SequenceNumber":"1","SizeBytes":9000,"StreamViewType":"NEW_AND_OLD_IMAGES"}}]}`)
	park := &keptParker{}
	w := worker.New(invalidate.New(&cachetest.Cache{Forgetful: true}, invalidate.Options{Rules: rules}),
		worker.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: io.Discard, Park: park})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	rep, err := w.Lambda(ctx, events.SourceDynamoDB, payload)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil || len(park.records) != 1 || !strings.Contains(park.records[0].Reason, "plans more than 50000 keys") {
		t.Fatalf("%v, %d parked (%v): want the record parked, past its 50,000 keys", err, len(park.records), rep.Records)
	}
	mib := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	if mib > 64 || took > time.Second {
		t.Fatalf("parked after %v, %.1f MiB allocated: want within a second and 64 MiB", took, mib)
	}
	t.Logf("parked after %v, %.1f MiB allocated", took, mib)
}

// keptParker keeps what it is given.
type keptParker struct{ records []failurequeue.Record }

func (p *keptParker) Park(_ context.Context, records []failurequeue.Record) []error {
	p.records = append(p.records, records...)
	return make([]error, len(records))
}
