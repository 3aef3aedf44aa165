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
// loses: SQS queues that keep each message 60 s (their
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
//
// The deletes a failover loses are the newest, and SQS hands a queue out
// about oldest first: read from one queue, they would come last, after a
// minute of the fleet's batches. So the window is slots, a queue each,
// taken in turn for windowRetention/(slots-1) each: a batch sends to the
// slot of the moment, and a pass reads the slot it began in first, then
// the ones before it. A slot is taken again slots × its width after it
// began, when what it was sent then is past its retention: it holds one
// slot's messages. One queue is one slot, always.
type Window struct {
	Client queues.SQS
	// URLs are the slots' queues, in the order they are taken.
	URLs []string
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
	return sendAgain(ctx, w.Client, w.URLs[w.slot(time.Now())], []delivery{{tail: events.AgainEnd}}, cmp.Or(w.MaxBytes, DefaultDelayMaxBytes), keys, tags)
}

// slot is the index of the slot taken at a moment.
func (w Window) slot(at time.Time) int {
	if len(w.URLs) < 2 {
		return 0
	}
	width := windowRetention * time.Second / time.Duration(len(w.URLs)-1)
	return int(at.UnixNano() / int64(width) % int64(len(w.URLs)))
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
// ID, queue and receipt, to show it again should its re-delete fail.
type windowMessage struct {
	changes []events.Change
	id      string
	url     string
	handle  string
}

// read receives a round of p's slot, windowReceives at once, hiding each
// message for windowHide, and returns those not in p.seen, adding them to
// it. A round that gives none it has not seen, and not a full round, moves
// p to the slot before (SQS's short polls sample its servers: what one
// misses, the pass that follows reads); done says p has read the oldest.
// A message that is not one of the window's is skipped: nothing else
// writes there.
func (w Window) read(ctx context.Context, p *pass) (msgs []windowMessage, done bool, err error) {
	if !p.begun {
		p.first, p.begun = w.slot(time.Now()), true
	}
	url := w.URLs[(p.first-p.back+len(w.URLs))%len(w.URLs)]
	outs := make([][]queues.Message, windowReceives)
	errs := make([]error, windowReceives)
	var wg sync.WaitGroup
	for i := range windowReceives {
		wg.Go(func() { outs[i], _, errs[i] = queues.Receive(ctx, w.Client, url, 10, 0, windowHide) })
	}
	wg.Wait()
	fresh, received := 0, 0
	for _, out := range outs {
		received += len(out)
		for _, m := range out {
			if p.seen[m.ID] {
				continue
			}
			p.seen[m.ID] = true
			fresh++
			changes, err := events.DecodeSQSBody(m.ID, m.Body, "")
			if err == nil && len(changes) > 0 {
				msgs = append(msgs, windowMessage{changes: changes, id: m.ID, url: url, handle: m.Handle})
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return msgs, false, err
	}
	if fresh == 0 && received < windowReceives*10 { // a full round of seen ones: an unread tail may follow
		p.back++
	}
	return msgs, p.back >= len(w.URLs), nil
}

// show makes messages visible again at once, for the next process that
// reads the window.
func (w Window) show(ctx context.Context, msgs []windowMessage) error {
	back := map[string][]queues.Return{}
	for _, m := range msgs {
		back[m.url] = append(back[m.url], queues.Return{Handle: m.handle})
	}
	var errs []error
	for url, returns := range back {
		errs = append(errs, queues.HandBack(ctx, w.Client, url, returns))
	}
	return errors.Join(errs...)
}
