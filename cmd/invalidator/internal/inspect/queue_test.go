package inspect

import (
	"context"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// TestTheSkippedBacklogIsLeftAlone: messages sent before the inspection
// are not read, so they are not deleted: once the reading ends they are
// visible again, as they were. Those read are deleted.
func TestTheSkippedBacklogIsLeftAlone(t *testing.T) {
	const url = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-inspect"
	f := &queuestest.SQS{}
	for range 25 {
		f.Send(url, `{"entity":"user","id":"1"}`)
	}
	q := &Queue{Client: f, URL: url, Since: time.Now().Add(time.Hour)} // all of them sent before
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	read := 0
	if err := q.Read(ctx, func([]events.Change, error) { read++ }, func(err error) { t.Error(err) }); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Messages(url) {
		if m.Deleted || m.VisibleAt.After(time.Now()) {
			t.Fatalf("%s: deleted %v, visible at %v: want it left, visible", m.ID, m.Deleted, m.VisibleAt)
		}
	}
	if read != 0 {
		t.Fatalf("%d read, want none", read)
	}

	q.Since = time.Now().Add(-time.Hour) // now all of them are fresh
	ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if err := q.Read(ctx, func([]events.Change, error) { read++ }, func(err error) { t.Error(err) }); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Messages(url) {
		if !m.Deleted {
			t.Fatalf("%s was read and not deleted", m.ID)
		}
	}
}
