package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// The front ends whole, payload to answer, against the fakes: any payload
// gives an answer or an error, never a panic, and names each record to
// retry once. The corpora start from the decoders' fixtures.

func fuzzFrontEnd(f *testing.F, glob string, handle func(w *Worker, ctx context.Context, payload []byte) ([]string, error)) {
	files, _ := filepath.Glob(filepath.Join("..", "events", "testdata", glob))
	if len(files) == 0 {
		f.Fatalf("no fixtures match events/testdata/%s: the corpus would start empty", glob)
	}
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"Records":[{}]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		sqsFake := &queuestest.SQS{}
		w := againWorker(sqsFake, &cachetest.Cache{Fail: down}, nilWriter{})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		failed, err := handle(w, ctx, payload)
		if err == nil {
			seen := map[string]bool{}
			for _, id := range failed {
				if seen[id] {
					t.Fatalf("%q answered twice", id)
				}
				seen[id] = true
			}
		}
	})
}

type nilWriter struct{}

func (nilWriter) Write(p []byte) (int, error) { return len(p), nil }

// named is a batch's records to retry.
func named(o Outcome, err error) ([]string, error) { return o.ToRetry(), err }

func FuzzSQSFrontEnd(f *testing.F) {
	fuzzFrontEnd(f, "sqs*.json", func(w *Worker, ctx context.Context, payload []byte) ([]string, error) {
		return named(w.Lambda(ctx, events.SourceSQS, payload))
	})
}

func FuzzStreamFrontEnd(f *testing.F) {
	fuzzFrontEnd(f, "dynamodb*.json", func(w *Worker, ctx context.Context, payload []byte) ([]string, error) {
		return named(w.Lambda(ctx, events.SourceDynamoDB, payload))
	})
}

func FuzzSNSFrontEnd(f *testing.F) {
	fuzzFrontEnd(f, "sns*.json", func(w *Worker, ctx context.Context, payload []byte) ([]string, error) {
		return named(w.Lambda(ctx, events.SourceSNS, payload))
	})
}

func FuzzKinesisFrontEnd(f *testing.F) {
	fuzzFrontEnd(f, "kinesis*.json", func(w *Worker, ctx context.Context, payload []byte) ([]string, error) {
		return named(w.Lambda(ctx, events.SourceKinesis, payload))
	})
}

func FuzzKafkaFrontEnd(f *testing.F) {
	fuzzFrontEnd(f, "kafka*.json", func(w *Worker, ctx context.Context, payload []byte) ([]string, error) {
		return named(w.Lambda(ctx, events.SourceKafka, payload))
	})
}
