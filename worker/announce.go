package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/announce"
)

// errAnnounce fails the records whose keys could not be announced: they
// are deleted and announced again when their source retries them.
var errAnnounce = errors.New("deleted, but not announced to the local tiers")

// announceChunk is the most keys one announcement holds: a local tier
// decodes each message whole.
const announceChunk = 500

// heartbeat publishes the worker's heartbeats on its announcer until
// close.
type heartbeat struct {
	stop context.CancelFunc
	done sync.WaitGroup
}

// startHeartbeat sends one through pub every interval (none when 0) until
// close.
func startHeartbeat(pub *announce.Publisher, channel string, interval time.Duration, log *slog.Logger) *heartbeat {
	h := &heartbeat{stop: func() {}}
	if interval > 0 {
		ctx, stop := context.WithCancel(context.Background())
		h.stop = stop
		h.done.Go(func() {
			pub.Beat(ctx, interval, func(err error) { log.Debug("heartbeat not sent", "channel", channel, "error", err.Error()) })
		})
	}
	log.Info("deletes are announced to the local tiers", "announce_channel", channel, "publisher", pub.ID(), "heartbeat", interval.String())
	return h
}

func (h *heartbeat) close() {
	h.stop()
	h.done.Wait()
}

// announcements counts a batch's announcements.
type announcements struct {
	messages int           // sent
	failed   int           // keys whose message could not be sent
	took     time.Duration // all of them
}

// announce publishes what the batch deleted, or found absent — a local
// tier may hold it either way —: its keys and its tags' entries, and the
// tags whose entries the report could not all carry, which the tiers
// forget whole. A message that cannot be sent is tried again until the
// batch's retries end; then the records of its keys fail for now, with
// errAnnounce, or for good when the cache refused it for good.
func (w *Worker) announce(ctx context.Context, o *Outcome, at time.Time, retryFor time.Duration) (n announcements) {
	if w.opts.Announce == nil {
		return n
	}
	began := time.Now()
	defer func() { n.took = time.Since(began) }()
	var keys owned
	var whole []string // tags announced as tags
	seenTag := map[string]bool{}
	for i := range o.Report.Results {
		res := &o.Report.Results[i]
		for _, k := range res.Keys {
			if k.Status != invalidate.KeyFailed {
				keys.add(k.Key, i)
			}
		}
		for _, t := range res.Tags {
			for _, e := range t.Entries {
				keys.add(e, i)
			}
			if t.Incomplete && !seenTag[t.Tag] {
				seenTag[t.Tag] = true
				whole = append(whole, t.Tag)
			}
		}
	}
	retries, cancel := ctx, context.CancelFunc(func() {})
	if retryFor > 0 {
		retries, cancel = context.WithTimeout(ctx, retryFor)
	}
	defer cancel()
	for start := 0; start < len(keys.names); start += announceChunk {
		chunk := keys.names[start:min(start+announceChunk, len(keys.names))]
		if err := w.publish(ctx, retries, at, chunk, nil); err != nil {
			n.failed += len(chunk)
			keys.fail(o, chunk, fmt.Errorf("%w: %w", errAnnounce, err), cacheerr.Transient(err))
			continue
		}
		n.messages++
	}
	if len(whole) > 0 {
		if err := w.publish(ctx, retries, at, nil, whole); err != nil {
			n.failed += len(whole)
			failTags(o, seenTag, fmt.Errorf("%w: %w", errAnnounce, err), cacheerr.Transient(err))
		} else {
			n.messages++
		}
	}
	return n
}

// publish sends one announcement, and again with backoff while it fails
// for now, until retries ends: once at least.
func (w *Worker) publish(ctx, retries context.Context, at time.Time, keys, tags []string) error {
	err := w.opts.Announce.Announce(ctx, at, keys, tags)
	for attempt := 1; err != nil && cacheerr.Transient(err); attempt++ {
		d := wait.Backoff(50*time.Millisecond, time.Second, attempt)
		if deadline, ok := retries.Deadline(); ok && time.Until(deadline) < d || !wait.For(retries, d) {
			break
		}
		err = w.opts.Announce.Announce(ctx, at, keys, tags)
	}
	return err
}

// failTags fails the records of the tags named in tags with err.
func failTags(o *Outcome, tags map[string]bool, err error, transient bool) {
	for i := range o.Report.Results {
		for _, t := range o.Report.Results[i].Tags {
			if tags[t.Tag] {
				o.fail(i, err, transient)
				break
			}
		}
	}
}

// Publish is announce.Sender's, on the worker's own connection: what it
// cannot publish before ctx ends fails, like a delete.
func (c *connection) Publish(ctx context.Context, channel, message string) error {
	client, err := c.get(ctx)
	if err != nil {
		return err
	}
	return announce.Valkey(client).Publish(ctx, channel, message)
}
