package lambda_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/lambda"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// mostPathFiles is the most files of the worker's (worker/ and below) a
// delete may be called through, the SQS function's handler to the cache: 6 when a record went
// through wrappers of the cache (recording, announcing) and a handler per
// source; half of that now.
const mostPathFiles = 3

// TestTheDeletePathIsStraight takes one SQS record through the SQS
// function's handler, on a worker with everything a deployment turns on
// (announcements, re-deletes, second deletes, a failure queue), and reads
// the stacks the fake cache is asked to delete from. The deletes run on
// goroutines of their own, so the stacks are read with the goroutines that
// started them (GODEBUG=tracebackancestors, set for a child process): the
// whole path, from the handler down.
func TestTheDeletePathIsStraight(t *testing.T) {
	if os.Getenv("PATH_TEST_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTheDeletePathIsStraight$", "-test.v")
		cmd.Env = append(os.Environ(), "PATH_TEST_CHILD=1", "GODEBUG=tracebackancestors=100")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	var mu sync.Mutex
	var stacks []string
	cache := &cachetest.Cache{Fail: func(string, int) error {
		b := make([]byte, 1<<20)
		mu.Lock()
		defer mu.Unlock()
		stacks = append(stacks, string(b[:runtime.Stack(b, false)]))
		return nil
	}}
	queues := &queuestest.SQS{}
	const queue = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
	again, window := worker.Config{SecondDeleteQueueURL: queue + "-again", SecondDeleteDelay: time.Second, FailoverWindowQueueURL: queue + "-window"}.Again(queues)
	w := worker.New(invalidate.New(cache, invalidate.Options{}), worker.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard,
		Park: failurequeue.Queue{Client: queues, URL: queue + "-failures"}, Queues: queues,
		Window: window, SecondDelete: again, Announce: announce.NewPublisher(discard{}, "near")})
	payload, _ := json.Marshal(lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{{MessageId: "1", Body: `{"entity":"user","id":"1"}`}}})
	resp, err := lambda.SQS(w, context.Background(), payload)
	if err != nil || len(resp.BatchItemFailures) != 0 || len(stacks) != 1 {
		t.Fatalf("answer %+v, %v; %d deletes, want 1", resp, err, len(stacks))
	}
	_, self, _, _ := runtime.Caller(0)
	dir := strings.TrimSuffix(self, "lambda/path_test.go")
	files := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\S+\.go):\d+`).FindAllStringSubmatch(stacks[0], -1) {
		if strings.HasPrefix(m[1], dir) && !strings.HasSuffix(m[1], "_test.go") && !strings.Contains(m[1], "/cachetest/") {
			files[strings.TrimPrefix(m[1], dir)] = true
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for f := range files {
			if !yield(f) {
				return
			}
		}
	})
	if !slices.Contains(names, "lambda/answers.go") {
		t.Fatalf("the stack does not reach the handler (GODEBUG ancestors?): %v\n%s", names, stacks[0])
	}
	if len(names) > mostPathFiles {
		t.Fatalf("the delete is called through %d files, want at most %d: %v", len(names), mostPathFiles, names)
	}
	t.Logf("the delete is called through %d files: %v", len(names), names)
}

// discard takes every announcement.
type discard struct{}

func (discard) Publish(context.Context, string, string) error { return nil }
