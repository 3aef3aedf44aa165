package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/announce"
)

// ErrAnnounce fails the keys whose announcement could not be sent: they
// are deleted and announced again, like keys whose delete failed, and
// their record fails for now if they still cannot be.
var ErrAnnounce = errors.New("deleted, but not announced to the local tiers")

// announcer announces the worker's deletes on the channel of the
// services' local tiers (writethrough/local), and its heartbeats.
type announcer struct {
	pub  *announce.Publisher
	stop context.CancelFunc
	done sync.WaitGroup
}

// startAnnouncer publishes through send on channel, with a heartbeat every
// heartbeat (none when 0) until close.
func startAnnouncer(send announce.Sender, channel string, heartbeat time.Duration, log *slog.Logger) *announcer {
	a := &announcer{pub: announce.NewPublisher(send, channel), stop: func() {}}
	if heartbeat > 0 {
		ctx, stop := context.WithCancel(context.Background())
		a.stop = stop
		a.done.Go(func() {
			a.pub.Beat(ctx, heartbeat, func(err error) { log.Debug("heartbeat not sent", "channel", channel, "error", err.Error()) })
		})
	}
	log.Info("deletes are announced to the local tiers", "announce_channel", channel, "publisher", a.pub.ID(), "heartbeat", heartbeat.String())
	return a
}

func (a *announcer) close() {
	a.stop()
	a.done.Wait()
}

// wrap returns cache, announcing the keys of each Unlink that were deleted
// or found absent — a local tier may hold them either way — in one
// message, once the call returns: one per chunk of a batch's keys, which
// valkey-go sends on to each slot's node. Keys whose message cannot be
// sent fail for now, with ErrAnnounce. A cache that is a TagCache stays
// one: the entries of a tag are deleted, and announced, as keys.
func (a *announcer) wrap(cache invalidate.Cache) invalidate.Cache {
	c := announcing{cache, a.pub}
	if tags, ok := cache.(invalidate.TagCache); ok {
		return announcingTags{c, tags}
	}
	return c
}

type announcing struct {
	invalidate.Cache
	pub *announce.Publisher
}

type announcingTags struct {
	announcing
	invalidate.TagCache
}

func (c announcing) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	at := time.Now() // what the source held before the deletes, a load after them sees or newer
	errs := c.Cache.Unlink(ctx, keys, status)
	done := make([]string, 0, len(keys))
	for i, k := range keys {
		if status[i] != invalidate.KeyFailed {
			done = append(done, k)
		}
	}
	if len(done) == 0 {
		return errs
	}
	began := time.Now()
	err := c.pub.Announce(ctx, at, done, nil)
	tallyOf(ctx).add(len(done), err, time.Since(began))
	if err == nil {
		return errs
	}
	if errs == nil {
		errs = make([]error, len(keys))
	}
	err = fmt.Errorf("%w: %w", ErrAnnounce, err)
	for i := range keys {
		if status[i] != invalidate.KeyFailed {
			status[i], errs[i] = invalidate.KeyFailed, err
		}
	}
	return errs
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

// announcements counts a batch's announcements.
type announcements struct {
	messages atomic.Int64 // sent
	failed   atomic.Int64 // keys whose message could not be sent
	longest  atomic.Int64 // nanoseconds of the longest announcement
}

type tallyKey struct{}

// withTally returns ctx carrying a batch's count of announcements, which
// the announcing cache adds to.
func withTally(ctx context.Context) (context.Context, *announcements) {
	t := &announcements{}
	return context.WithValue(ctx, tallyKey{}, t), t
}

func tallyOf(ctx context.Context) *announcements {
	t, _ := ctx.Value(tallyKey{}).(*announcements)
	return t
}

// counts returns the messages sent and the keys not announced.
func (t *announcements) counts() (messages, failed int64) {
	if t == nil {
		return 0, 0
	}
	return t.messages.Load(), t.failed.Load()
}

// took is how long the batch's longest announcement took: the chunks of
// its keys are deleted and announced side by side, each announcement
// after its own deletes, so the longest is what the batch waited for.
func (t *announcements) took() time.Duration {
	if t == nil {
		return 0
	}
	return time.Duration(t.longest.Load())
}

// add counts one announcement of keys, which took took.
func (t *announcements) add(keys int, err error, took time.Duration) {
	for t != nil {
		if old := t.longest.Load(); int64(took) <= old || t.longest.CompareAndSwap(old, int64(took)) {
			break
		}
	}
	switch {
	case t == nil:
	case err != nil:
		t.failed.Add(int64(keys))
	default:
		t.messages.Add(1)
	}
}
