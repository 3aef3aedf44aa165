package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// channel is a fake of the announcements' channel: what was published,
// or refused while fail says so.
type channel struct {
	mu   sync.Mutex
	sent []announce.Message
	fail func(announce.Message) error
}

func (c *channel) Publish(_ context.Context, _, payload string) error {
	m, err := announce.Decode(payload)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		if err := c.fail(m); err != nil {
			return err
		}
	}
	c.sent = append(c.sent, m)
	return nil
}

// announcedKeys are the keys of every message sent, in order.
func (c *channel) announcedKeys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for _, m := range c.sent {
		keys = append(keys, m.Keys...)
	}
	return keys
}

// announcingWorker is testWorker's, announcing on ch; its log is logs.
func announcingWorker(ch *channel, cache *cachetest.Cache, logs io.Writer) *Worker {
	inv := invalidate.New(cache, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	return New(inv, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: io.Discard, DeadlineMargin: 100 * time.Millisecond,
		Announce: announce.NewPublisher(ch, "test")})
}

func TestEveryDeleteIsAnnouncedOnceItSucceeded(t *testing.T) {
	ch := &channel{}
	w := announcingWorker(ch, &cachetest.Cache{Fail: down}, io.Discard)
	defer w.Close()
	records := []invalidate.Record{
		{ID: "1", Changes: []events.Change{{Entity: "user", ID: "1"}, {Entity: "user", ID: "2"}}},
		{ID: "2", Changes: []events.Change{{Keys: []string{"cache:user:3"}, SecondDelete: true}}},
		{ID: "3", Changes: []events.Change{{Entity: "down", ID: "9"}}},
	}
	rep := w.Handle(deadline(t), events.SourceSQS, invalidate.Decoded(records), nil)
	if got := rep.ToRetry(); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("to retry %v, want record 3", got)
	}
	keys := ch.announcedKeys()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"cache:user:1", "cache:user:2", "cache:user:3"}) {
		t.Fatalf("announced %v: want the first and second deletes done, not the key that failed", keys)
	}
	if ch.sent[0].Seq != 1 || len(ch.sent) != 1 {
		t.Fatalf("sent %+v: want the batch's keys in one message, the first of its publisher", ch.sent)
	}
}

func TestAKeyNotAnnouncedFailsItsRecordForNow(t *testing.T) {
	ch := &channel{fail: func(m announce.Message) error {
		if slices.Contains(m.Keys, "cache:user:2") {
			return &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET} // the connection lost
		}
		return nil
	}}
	var logs bytes.Buffer
	w := announcingWorker(ch, &cachetest.Cache{}, &logs)
	defer w.Close()
	rep := w.Handle(deadline(t), events.SourceSQS, invalidate.Decoded([]invalidate.Record{
		{ID: "1", Changes: []events.Change{{Entity: "user", ID: "2"}}},
	}), nil)
	if res := rep.Records[0]; res.Fate != Retry || !res.Transient || !errors.Is(res.Err, errAnnounce) {
		t.Fatalf("result %+v: want the record retried, for its announcement", res)
	}
	if !strings.Contains(logs.String(), `"announce_failed_keys":`) || strings.Contains(logs.String(), `"announce_failed_keys":0`) {
		t.Fatalf("the batch line does not count the keys not announced: %s", logs.String())
	}
}

func TestReDeletesAreAnnounced(t *testing.T) {
	ch := &channel{}
	w := announcingWorker(ch, &cachetest.Cache{}, io.Discard)
	defer w.Close()
	w.opts.Window = &Window{Client: &queuestest.SQS{}, URLs: []string{testQueueURL + "-window"}}
	w.opts.Window.Add(t.Context(), []string{"cache:user:7"}, nil)
	w.signs.started([]string{"node:1"})
	w.signs.connectedTo("node:1")
	w.signs.connectedTo("node:1") // a reconnect
	w.Handle(deadline(t), events.SourceSQS, invalidate.Decoded([]invalidate.Record{{ID: "1", Changes: []events.Change{{Entity: "user", ID: "8"}}}}), nil)
	if keys := ch.announcedKeys(); !slices.Contains(keys, "cache:user:7") || !slices.Contains(keys, "cache:user:8") {
		t.Fatalf("announced %v: want the batch's key and the one deleted again", keys)
	}
}
