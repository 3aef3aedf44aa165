package worker

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// TestAForeignValueAtATagParksItsRecordAtOnce: a tag key holding a string
// (WRONGTYPE), or a tag clock that is no integer, is what the cache will
// answer however often it is asked: on the real server the worker parks
// the record at its first try, with the reply as its reason, and the
// record beside it is done.
func TestAForeignValueAtATagParksItsRecordAtOnce(t *testing.T) {
	admin := testenv.Cache(t)
	cfg := testenv.WorkerCacheConfig(t)
	for _, tc := range []struct {
		name, reason string
		foreign      func(prefix string) string // the key given a string
	}{
		{"a tag holding a string", "WRONGTYPE", func(prefix string) string { return prefix + "t" }},
		{"a tag clock that is no integer", "not an integer", func(prefix string) string { return prefix }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "cache:tag:foreign:" + rand.Text()[:8] + ":"
			key := tc.foreign(prefix)
			if err := admin.Do(t.Context(), admin.B().Set().Key(key).Value("a string").Ex(time.Minute).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			rules, err := invalidate.NewRules(invalidate.RulesConfig{TagPrefix: prefix, AllowedKeys: []string{"cache:*"}})
			if err != nil {
				t.Fatal(err)
			}
			sqsFake := &queuestest.SQS{}
			w := New(invalidate.New(connectAs(t, cfg), invalidate.Options{Rules: rules}), Options{
				Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, RetryFor: 5 * time.Second,
				Park: failurequeue.Queue{Client: sqsFake, URL: failureURL}, Queues: sqsFake})
			payload, msgs := received(t, sqsFake, `{"tags":["t"]}`, `{"entity":"user","id":"`+rand.Text()+`"}`)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			start := time.Now()
			resp, err := answerOf(w.Lambda(ctx, events.SourceSQS, payload))
			if err != nil || len(resp.Retry) != 0 {
				t.Fatalf("response %+v, %v: want nothing retried", resp, err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the batch took %v: the tag was retried for its RetryFor (5 s)", took)
			}
			p := parked(t, sqsFake)
			if len(p) != 1 || p[0].ID != msgs[0].MessageId || !strings.Contains(p[0].Reason, tc.reason) {
				t.Fatalf("parked %+v: want the tagged message, for %s", p, tc.reason)
			}
		})
	}
}
