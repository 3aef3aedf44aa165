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

// SecondDeleter deletes keys a second time, later, and invalidates tags
// again: a fill that read the source before a change, and landed after
// its invalidation — a loader reading a replica, a cache-aside recipe
// without a lease — is deleted then. Config.Again gives one.
type SecondDeleter interface {
	// Schedule schedules keys and tags and returns those it could not.
	Schedule(ctx context.Context, keys, tags []string) (failedKeys, failedTags []string)
}

// delayQueue schedules second deletes as change messages
// ({"keys":[...],"secondDelete":true}, or "tags") in an SQS queue, each
// hidden for Delay, that the SQS function or the poller consumes: they
// survive the process that sent them. A change marked secondDelete is
// deleted and never delayed again. With FailoverAfter it schedules each
// key and tag once more, that long after, marked "failover": true — the
// failover schedule (docs/operations.md, "Deletes that survive a
// failover") —, in the same request as the second delete.
type delayQueue struct {
	Client queues.SQS
	URL    string
	// Delay is how long after the first delete the second comes: longer
	// than the slowest load plus the replica lag. SQS counts it in whole
	// seconds, at most 900. Zero: none.
	Delay time.Duration
	// FailoverAfter is how long after the first delete the failover
	// schedule's comes: longer than the replication lag a failover can
	// lose, so that it lands on whichever primary then holds the key.
	// Zero: none.
	FailoverAfter time.Duration
	// MaxBytes is the most a message holds, as sent: the queue's
	// MaximumMessageSize. Default DefaultDelayMaxBytes.
	MaxBytes int
}

// DefaultDelayMaxBytes is the delay queue's MaximumMessageSize in
// template.yaml.
const DefaultDelayMaxBytes = 256 << 10

// errSecondDelete fails a record whose second delete, failover schedule or
// window could not be sent: it is retried, and never acknowledged without
// them.
var errSecondDelete = errors.New("second delete not scheduled")

// delivery is one of the messages each chunk of names goes out as: its
// end, and how long it stays hidden.
type delivery struct {
	tail  string
	delay time.Duration
}

// Schedule is SecondDeleter's: each chunk's second delete and failover
// schedule, in one request.
func (q delayQueue) Schedule(ctx context.Context, keys, tags []string) (failedKeys, failedTags []string) {
	var deliveries []delivery
	if q.Delay > 0 {
		deliveries = append(deliveries, delivery{events.AgainEnd, q.Delay})
	}
	if q.FailoverAfter > 0 {
		deliveries = append(deliveries, delivery{events.FailoverEnd, q.FailoverAfter})
	}
	return sendAgain(ctx, q.Client, q.URL, deliveries, cmp.Or(q.MaxBytes, DefaultDelayMaxBytes), keys, tags)
}

// sendAgain sends keys and tags to the queue at url as second-delete
// messages, each chunk once per delivery in one request, ten requests at
// a time, each chunk encoded as its turn comes: ten in memory at most,
// however many keys. It returns what it could not send.
func sendAgain(ctx context.Context, client queues.SQS, url string, deliveries []delivery, limit int, keys, tags []string) (failedKeys, failedTags []string) {
	if len(deliveries) == 0 {
		return nil, nil
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, 10)
	for _, kind := range []struct {
		names  []string
		tags   bool
		failed *[]string
	}{{keys, false, &failedKeys}, {tags, true, &failedTags}} {
		for msg := range events.AgainMessages(kind.names, kind.tags, limit) {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				if err := send(ctx, client, url, deliveries, msg.Body); err != nil {
					mu.Lock()
					defer mu.Unlock()
					*kind.failed = append(*kind.failed, msg.Names...)
				}
			})
		}
	}
	wg.Wait()
	return failedKeys, failedTags
}

// send sends the message of body once per delivery, in one request.
func send(ctx context.Context, client queues.SQS, url string, deliveries []delivery, body []byte) error {
	msgs := make([]queues.Outgoing, len(deliveries))
	for i, d := range deliveries {
		msgs[i] = queues.Outgoing{Body: string(body) + d.tail, Delay: d.delay}
	}
	return queues.Send(ctx, client, url, msgs...)
}

// scheduled counts the distinct keys and tags a batch sent to be deleted
// again later.
type scheduled struct{ keys, tags int }

// scheduleAgain sends the keys and tags of the records done, but for
// second deletes themselves, to be deleted again — to the delay queue
// (second delete, failover schedule) and to the failover window —, and
// fails for now the records whose keys or tags could not be sent to each.
func (w *Worker) scheduleAgain(ctx context.Context, o *Outcome) (n scheduled) {
	var keys, tags owned
	for i, res := range o.Report.Results {
		if res.SecondDelete || o.Records[i].Err != nil || (w.opts.SecondDelete == nil && w.opts.Window == nil) {
			continue
		}
		for _, k := range res.Keys {
			keys.add(k.Key, i)
		}
		for _, t := range res.Tags {
			tags.add(t.Tag, i)
		}
	}
	if len(keys.names)+len(tags.names) == 0 {
		return n
	}
	var failedKeys, failedTags, windowKeys, windowTags []string
	var wg sync.WaitGroup
	if w.opts.SecondDelete != nil {
		wg.Go(func() { failedKeys, failedTags = w.opts.SecondDelete.Schedule(ctx, keys.names, tags.names) })
		n.keys, n.tags = len(keys.names), len(tags.names)
	}
	if w.opts.Window != nil {
		wg.Go(func() { windowKeys, windowTags = w.opts.Window.Add(ctx, keys.names, tags.names) })
	}
	wg.Wait()
	n.keys -= len(failedKeys)
	n.tags -= len(failedTags)
	keys.fail(o, append(failedKeys, windowKeys...), errSecondDelete, true)
	tags.fail(o, append(failedTags, windowTags...), errSecondDelete, true)
	return n
}

// owned are distinct keys or tags, and the records of each.
type owned struct {
	names   []string
	records map[string][]int
}

func (o *owned) add(name string, record int) {
	if o.records == nil {
		o.records = map[string][]int{}
	}
	if o.records[name] == nil {
		o.names = append(o.names, name)
	}
	o.records[name] = append(o.records[name], record)
}

// fail fails the records of names with err.
func (o *owned) fail(out *Outcome, names []string, err error, transient bool) {
	for _, name := range names {
		for _, i := range o.records[name] {
			out.fail(i, err, transient)
		}
	}
}
