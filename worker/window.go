package worker

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// Window is the fleet's record of its last minute of first deletes, kept
// outside every process and outside the cache, whose own writes a failover
// loses: an SQS queue that keeps each message 60 s (its
// MessageRetentionPeriod, SQS's least) and that nothing consumes. Every
// batch sends it what it deleted — keys, and tags —, as second-delete
// messages. When any process sees a sign of a failover it reads the
// window, all of it, and deletes it again (Worker.afterSign): the deletes
// the failover lost are done again whichever process did them first,
// whether or not that process lives on. A read hides a message for
// windowHide only: the processes that see a sign at once share the
// window, and a sign that comes before the promotion — a connection cut
// while the old primary still takes deletes, which it then loses — does
// not use the window up; each such pass is followed by another once its
// messages show again (signs.follow).
type Window struct {
	Client queues.SQS
	URL    string
	// MaxBytes is the most a message holds, as sent: the queue's
	// MaximumMessageSize. Default DefaultDelayMaxBytes.
	MaxBytes int
}

// windowRetention is how long the window's queue keeps a message: SQS's
// least, and longer than the replication lag a failover can lose and the
// seconds until a process sees a sign of it.
const windowRetention = 60

// Add sends keys and tags to the window and returns those it could not
// send.
func (w Window) Add(ctx context.Context, keys, tags []string) (failedKeys, failedTags []string) {
	return sendAgain(ctx, w.Client, w.URL, []delivery{{tail: events.AgainEnd}}, cmp.Or(w.MaxBytes, DefaultDelayMaxBytes), keys, tags)
}

// windowHide is how long a read hides a window's message:
// longer than a round of a pass takes, so that the processes reading at
// once share the window, and short, for the pass that follows it
// (signs.follow) comes this long after, and a lost delete is done again
// within it of the promotion.
const windowHide = 2 * time.Second

// windowReceives is how many receives a round of a pass sends at once:
// the window holds a minute of the fleet's batches, and a receive gives
// ten.
const windowReceives = 4

// windowMessage is a message read from the window: its changes, and its
// ID and receipt, to show it again should its re-delete fail.
type windowMessage struct {
	changes []events.Change
	id      string
	handle  string
}

// read receives a round of the window's messages, windowReceives at once,
// hiding each for windowHide, and returns those not in seen, adding them
// to it, and how many it received that were not: none, and the pass has
// read all it can (SQS's short polls sample its servers: what one misses,
// the pass that follows reads). A message that is not one of the window's
// is skipped: nothing else writes there.
func (w Window) read(ctx context.Context, seen map[string]bool) (msgs []windowMessage, fresh int, err error) {
	outs := make([][]queues.Message, windowReceives)
	errs := make([]error, windowReceives)
	var wg sync.WaitGroup
	for i := range windowReceives {
		wg.Go(func() { outs[i], _, errs[i] = queues.Receive(ctx, w.Client, w.URL, 10, 0, windowHide) })
	}
	wg.Wait()
	for _, out := range outs {
		for _, m := range out {
			if seen[m.ID] {
				continue
			}
			seen[m.ID] = true
			fresh++
			changes, err := events.DecodeSQSBody(m.ID, m.Body, "")
			if err == nil && len(changes) > 0 {
				msgs = append(msgs, windowMessage{changes: changes, id: m.ID, handle: m.Handle})
			}
		}
	}
	return msgs, fresh, errors.Join(errs...)
}

// show makes messages visible again at once, for the next process that
// reads the window.
func (w Window) show(ctx context.Context, msgs []windowMessage) error {
	back := make([]queues.Return, len(msgs))
	for i, m := range msgs {
		back[i].Handle = m.handle
	}
	return queues.HandBack(ctx, w.Client, w.URL, back)
}
