package worker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

const delayURL = "https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-again"

// againWorker is testWorker with second deletes through the fake SQS, its
// batch log lines in logs.
func againWorker(sqsFake *queuestest.SQS, cache *cachetest.Cache, logs io.Writer) *Worker {
	inv := invalidate.New(cache, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	return New(inv, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: io.Discard, DeadlineMargin: 100 * time.Millisecond,
		Park: failurequeue.Queue{Client: sqsFake, URL: failureURL}, Queues: sqsFake,
		SecondDelete: delayQueue{Client: sqsFake, URL: delayURL, Delay: 2 * time.Second}})
}

// delayed returns the second-delete messages in the fake delay queue, and
// the keys they hold.
func delayed(t *testing.T, sqsFake *queuestest.SQS) (msgs []queuestest.Message, keys []string) {
	msgs, keys, _ = delayedTags(t, sqsFake)
	return msgs, keys
}

// delayedTags is delayed, with the tags the messages hold too.
func delayedTags(t *testing.T, sqsFake *queuestest.SQS) (msgs []queuestest.Message, keys, tags []string) {
	t.Helper()
	for _, m := range sqsFake.Messages(delayURL) {
		var body struct {
			Keys, Tags   []string
			SecondDelete bool
		}
		if err := json.Unmarshal([]byte(m.Body), &body); err != nil || !body.SecondDelete {
			t.Fatalf("not a second delete (%v): %s", err, m.Body)
		}
		msgs, keys, tags = append(msgs, m), append(keys, body.Keys...), append(tags, body.Tags...)
	}
	slices.Sort(keys)
	slices.Sort(tags)
	return msgs, keys, tags
}

func TestKeysAreDeletedAgainLater(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	w := againWorker(sqsFake, &cachetest.Cache{}, io.Discard)
	payload, _ := received(t, sqsFake, `{"entity":"user","id":"1"}`, `{"keys":["cache:a","cache:b"]}`, `{"entity":"user","id":"1"}`)
	if resp, err := answerOf(w.Lambda(deadline(t), events.SourceSQS, payload)); err != nil || len(resp.Retry) != 0 {
		t.Fatalf("response %+v, %v: want every message done", resp, err)
	}
	msgs, keys := delayed(t, sqsFake)
	if !slices.Equal(keys, []string{"cache:a", "cache:b", "cache:user:1"}) {
		t.Fatalf("second deletes of %q, want each key once", keys)
	}
	if hidden := msgs[0].VisibleAt.Sub(msgs[0].Sent); hidden != 2*time.Second {
		t.Fatalf("second delete hidden for %v, want the delay", hidden)
	}
}

func TestASecondDeleteIsNotDelayedAgain(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	var logs logLines
	w := againWorker(sqsFake, &cachetest.Cache{}, &logs)
	// Two paths scheduled cache:a: it counts once.
	payload, _ := received(t, sqsFake, `{"keys":["cache:a","cache:b"],"secondDelete":true}`, `{"keys":["cache:a"],"secondDelete":true}`)
	if resp, err := answerOf(w.Lambda(deadline(t), events.SourceSQS, payload)); err != nil || len(resp.Retry) != 0 {
		t.Fatalf("response %+v, %v", resp, err)
	}
	if msgs, _ := delayed(t, sqsFake); len(msgs) != 0 {
		t.Fatalf("%d messages delayed, want none: a second delete is the last", len(msgs))
	}
	// The fake cache finds every key: both were filled again.
	if line := logs.batch(t); line["again_delayed_keys"] != 2.0 || line["again_delayed_refills"] != 2.0 {
		t.Fatalf("batch line %v: want 2 keys deleted again, both refills", line)
	}
}

// TestTagsAreInvalidatedAgainLater: a change's tags are invalidated a
// second time, later, and the entries filled since count as refills.
func TestTagsAreInvalidatedAgainLater(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	cache := &cachetest.Cache{}
	cache.Tag("cache:tag:product:1", "cache:list:a", "cache:list:b")
	var logs logLines
	w := againWorker(sqsFake, cache, &logs)
	payload, _ := received(t, sqsFake, `{"entity":"product","id":"1","tags":["product:1"]}`)
	if resp, err := answerOf(w.Lambda(deadline(t), events.SourceSQS, payload)); err != nil || len(resp.Retry) != 0 {
		t.Fatalf("response %+v, %v", resp, err)
	}
	if line := logs.batch(t); line["tags_invalidated"] != 1.0 || line["tag_entries_deleted"] != 2.0 || line["again_tags_scheduled"] != 1.0 {
		t.Fatalf("batch line %v: want the tag and its 2 entries, its second delete scheduled", line)
	}
	msgs, keys, tags := delayedTags(t, sqsFake)
	if !slices.Equal(keys, []string{"cache:product:1"}) || !slices.Equal(tags, []string{"product:1"}) {
		t.Fatalf("second deletes of keys %q and tags %q", keys, tags)
	}
	cache.Tag("cache:tag:product:1", "cache:list:a") // filled again, from a lagging replica
	logs.Reset()
	payload, _ = received(t, sqsFake, msgs[0].Body, msgs[1].Body)
	if resp, err := answerOf(w.Lambda(deadline(t), events.SourceSQS, payload)); err != nil || len(resp.Retry) != 0 {
		t.Fatalf("response %+v, %v", resp, err)
	}
	if line := logs.batch(t); line["again_delayed_tags"] != 1.0 || line["again_delayed_refills"] != 1.0 {
		t.Fatalf("batch line %v: want the tag invalidated again, its refill caught", line)
	}
}

func TestARecordWhoseSecondDeleteCannotBeSentIsRetried(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	w := againWorker(sqsFake, &cachetest.Cache{}, io.Discard)
	payload, msgs := received(t, sqsFake, `{"entity":"user","id":"1"}`, `{"entity":"user","id":"2"}`)
	sqsFake.Fail = func(op string) error {
		if op == "SendMessage" {
			return errors.New("throttled")
		}
		return nil
	}
	resp, err := answerOf(w.Lambda(deadline(t), events.SourceSQS, payload))
	var failed []string
	for _, f := range resp.Retry {
		failed = append(failed, f.Record)
	}
	if err != nil || !slices.Equal(failed, []string{msgs[0].MessageId, msgs[1].MessageId}) {
		t.Fatalf("failed %q, %v: want both messages retried, their second deletes unsent", failed, err)
	}
	if p := parked(t, sqsFake); len(p) != 0 {
		t.Fatalf("parked %+v: a send that failed is for now, not for good", p)
	}
}

// templateDelayBytes is template.yaml's MaximumMessageSize of the delay
// queue.
const templateDelayBytes = 256 << 10

// TestSecondDeletesFitTheirQueueOnceEncoded: keys of characters that
// encoding/json writes as six bytes each (<, >, &, control characters)
// are sized as they are sent, never HTML-escaped, each message within the
// delay queue's limit, and come back exactly — U+FFFE and U+FFFF, which
// SQS refuses raw, escaped.
func TestSecondDeletesFitTheirQueueOnceEncoded(t *testing.T) {
	for _, c := range []struct {
		name string
		key  func(i int) string
		keys int
		most int // messages
	}{
		// 150 keys of 1,000 < each: a 152 KB body took 1.17 MB once escaped.
		{"HTML characters", func(i int) string { return fmt.Sprintf("cache:%04d:", i) + strings.Repeat("<", 1000) }, 150, 1},
		{"control characters", func(i int) string { return fmt.Sprintf("cache:%04d:", i) + strings.Repeat("\x01", 1000) }, 600, 15},
		{"what SQS refuses raw", func(i int) string { return fmt.Sprintf("cache:%04d:\uffff\ufffe\u2028&\x00", i) }, 10, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sqsFake := &queuestest.SQS{MaxBytes: map[string]int{delayURL: templateDelayBytes}}
			w := againWorker(sqsFake, &cachetest.Cache{}, io.Discard)
			want := make([]string, c.keys)
			for i := range want {
				want[i] = c.key(i)
			}
			body, _ := json.Marshal(map[string]any{"keys": want})
			payload, _ := received(t, sqsFake, string(body))
			if resp, err := answerOf(w.Lambda(deadlineIn(t, time.Minute), events.SourceSQS, payload)); err != nil || len(resp.Retry) != 0 {
				t.Fatalf("response %+v, %v: want the message done, its second deletes sent", resp, err)
			}
			msgs, keys := delayed(t, sqsFake)
			for _, m := range msgs {
				if len(m.Body) > templateDelayBytes {
					t.Fatalf("a second delete of %d bytes, the queue takes %d", len(m.Body), templateDelayBytes)
				}
			}
			if slices.Sort(want); !slices.Equal(keys, want) {
				t.Fatalf("second deletes of %d keys, want the %d keys exactly", len(keys), len(want))
			}
			if len(msgs) > c.most {
				t.Fatalf("%d messages, want at most %d: sized by their escaped form", len(msgs), c.most)
			}
		})
	}
}

// logLines holds a worker's JSON log lines.
type logLines struct{ bytes.Buffer }

// batch returns the batch line.
func (l *logLines) batch(t *testing.T) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(l.Bytes()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "batch" {
			return line
		}
	}
	t.Fatalf("no batch line in %s", l.String())
	return nil
}
