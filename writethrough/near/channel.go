package near

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/invalidate/announce"
)

// ChannelOptions tune a Channel. The zero value gives the defaults.
type ChannelOptions struct {
	// Channel is the pub/sub channel of the announcements: the worker's
	// ANNOUNCE_CHANNEL. Default "invalidator:near".
	Channel string
	// Heartbeat is how often this process looks whether a confirmation of
	// its last announcement is due (1, 2, 4 … 32 s after it, then quiet:
	// an idle fleet sends nothing), which shows the others any
	// announcement of its they missed, and PINGs its subscription.
	// Default 1 s.
	Heartbeat time.Duration
	// Silence is how long a PING on the subscription may go unanswered
	// before it is taken for lost: the tiers flush and it subscribes again.
	// Default 3 s.
	Silence time.Duration
	// Timeout bounds the announcement of a write (a Drop): past it the
	// write returns ErrAnnounce, and the others see the gap at this
	// process's next heartbeat. Default 150 ms, writethrough's
	// CacheTimeout.
	Timeout time.Duration
	// ReadOnly is for a user that may not publish (invalidator inspect's,
	// and every service that does not announce its writes): no heartbeats,
	// and this process's drops are not announced.
	ReadOnly bool
	// Logger receives a line when the subscription is made or lost, and
	// for each flush, with its cause. Default slog.Default().
	Logger *slog.Logger
	// OnMessage, when set, is called with each announcement once applied,
	// and when: for metrics of the announcements' lag (its At is when the
	// deletes were sent). It runs on the subscription's goroutine, and
	// must return quickly: a subscriber that falls behind is dropped by
	// the server.
	OnMessage func(m announce.Message, applied time.Time)
}

// Cause is why the tiers were flushed.
type Cause string

// The causes of a flush.
const (
	CauseLost        Cause = "lost"        // the subscription's connection ended: dropped by the server (a slow consumer, CLIENT KILL), a node gone, a failover
	CauseSilent      Cause = "silent"      // a PING on the subscription unanswered for Silence: a node that hangs
	CauseGap         Cause = "gap"         // a publisher's sequence jumped: a message of its was lost
	CauseOrder       Cause = "order"       // a publisher's sequence jumped further than any can, or went far back: a forged message
	CauseCrowded     Cause = "crowded"     // more publishers than a subscriber follows: forged IDs, or a fleet beyond 40,000 processes
	CauseUndecodable Cause = "undecodable" // a message this version cannot read
	CauseTags        Cause = "tags"        // tags announced, whose keys the tiers do not know
	CauseClosed      Cause = "closed"      // Close
)

// member is a tier, of whatever type, as its channel sees it.
type member interface {
	drop(key string)
	forget(cause Cause, vouched time.Time) (held int)
	Answered()
}

// Channel is one process's view of the announcements: its subscription,
// its publisher, and its tiers, flushed whenever it cannot vouch for them.
// It is safe for concurrent use.
type Channel struct {
	opts ChannelOptions
	pub  *announce.Publisher // nil when ReadOnly
	up   atomic.Bool         // subscribed: the tiers may keep reads
	// heard is when the subscription last proved it keeps up — when it was
	// confirmed, or when a PING was sent whose answer came after, so after
	// every message published before it, applied —, in the monotonic time
	// since born. A message applied proves nothing of those behind it: a
	// process that thaws applies the first while the rest wait unread.
	born  time.Time
	heard atomic.Int64

	mu      sync.Mutex // orders the subscription's events
	session uint64     // the subscription's: events of an older one are ignored
	seqs    *announce.Sequences
	node    string // where it is
	tiers   []member
	flushes map[Cause]int64

	messages, keys, missed, announced, announceErrors atomic.Int64
	lag                                               atomic.Int64

	stop context.CancelFunc
	done chan struct{}
}

var (
	errClosed       = errors.New("the channel is closed")
	errUnsubscribed = errors.New("not subscribed: its number is skipped")
)

// Open subscribes to the channel through client in the background, and
// keeps subscribing until Close: until it is confirmed the tiers keep
// nothing, and reads go to the shared cache. Its heartbeats start at once.
func Open(client valkey.Client, opts ChannelOptions) *Channel {
	c := newChannel(announce.Valkey(client), opts)
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	var wg sync.WaitGroup
	wg.Go(func() { c.subscribe(ctx, client) })
	if c.pub != nil {
		wg.Go(func() { c.pub.Beat(ctx, c.opts.Heartbeat, c.beatFailed) })
	}
	go func() { wg.Wait(); close(c.done) }()
	return c
}

func newChannel(send announce.Sender, opts ChannelOptions) *Channel {
	if opts.Channel == "" {
		opts.Channel = "invalidator:near"
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = time.Second
	}
	if opts.Silence <= 0 {
		opts.Silence = 3 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 150 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Logger = opts.Logger.With("near_channel", opts.Channel)
	c := &Channel{opts: opts, born: time.Now(), flushes: map[Cause]int64{}, done: make(chan struct{})}
	if !opts.ReadOnly {
		c.pub = announce.NewPublisher(send, opts.Channel)
	}
	return c
}

// Subscribed tells whether the subscription is confirmed: the tiers keep
// what is read meanwhile.
func (c *Channel) Subscribed() bool { return c.up.Load() }

// live tells whether the tiers may serve what they hold: subscribed, and
// heard from within a heartbeat and a silence. A process that did not run
// for longer — frozen between Lambda invokes, starved — may have
// announcements waiting unread on its connection: it serves nothing until
// the next PING's answer shows them applied.
func (c *Channel) live() bool {
	return c.up.Load() && time.Since(c.born)-time.Duration(c.heard.Load()) < c.opts.Heartbeat+c.opts.Silence
}

// hear notes that the subscription kept up until at.
func (c *Channel) hear(at time.Time) { c.heard.Store(int64(at.Sub(c.born))) }

// Close unsubscribes, stops the heartbeats and flushes the tiers.
func (c *Channel) Close() {
	if c.stop != nil {
		c.stop()
		<-c.done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.session++
	c.down(CauseClosed, errClosed)
}

func (c *Channel) join(m member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tiers = append(c.tiers, m)
}

func (c *Channel) leave(m member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tiers = slices.DeleteFunc(c.tiers, func(t member) bool { return t == m })
}

// subscribed starts a subscription's following of the publishers, from
// at, when it was confirmed.
func (c *Channel) subscribed(session uint64, at time.Time, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if session != c.session {
		return
	}
	c.seqs, c.node = announce.NewSequences(at), node
	c.hear(at)
	for _, t := range c.tiers {
		t.Answered() // the cache is back: nothing kept for StaleIfError is served
	}
	c.up.Store(true)
	c.opts.Logger.Info("near cache subscribed", "node", node)
}

// lost ends a subscription: the tiers flush, and keep nothing until the
// next one is confirmed.
func (c *Channel) lost(session uint64, cause Cause, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if session != c.session {
		return
	}
	c.session++
	c.down(cause, err)
}

// down marks the channel unsubscribed, then flushes; c.mu is held.
func (c *Channel) down(cause Cause, err error) {
	was := c.up.Swap(false)
	c.seqs = nil
	if held := c.forget(cause); cause != CauseClosed && (was || held > 0) {
		c.opts.Logger.Warn("near cache unsubscribed: flushed, reads go to the shared cache until it is subscribed again",
			"cause", string(cause), "flushed", held, "error", err.Error())
	}
}

// forget flushes every tier and counts the cause; c.mu is held.
func (c *Channel) forget(cause Cause) (held int) {
	for _, t := range c.tiers {
		held += t.forget(cause, c.born.Add(time.Duration(c.heard.Load())))
	}
	c.flushes[cause]++
	return held
}

// receive applies one message of the subscription.
func (c *Channel) receive(session uint64, payload string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if session != c.session || c.seqs == nil {
		return
	}
	now := time.Now()
	c.messages.Add(1)
	m, err := announce.Decode(payload)
	if err != nil {
		held := c.forget(CauseUndecodable)
		c.opts.Logger.Warn("near cache flushed: a message on the channel is not an announcement", "cause", string(CauseUndecodable),
			"flushed", held, "error", err.Error())
		return
	}
	switch missed, doubt := c.seqs.Next(m, now); {
	case doubt != nil:
		cause := CauseOrder
		if errors.Is(doubt, announce.ErrCrowded) {
			cause = CauseCrowded
		}
		held := c.forget(cause)
		c.opts.Logger.Warn("near cache flushed: a message's number cannot be trusted", "cause", string(cause), "publisher", m.Publisher,
			"seq", m.Seq, "flushed", held, "error", doubt.Error())
	case missed > 0:
		c.missed.Add(int64(missed))
		held := c.forget(CauseGap)
		c.opts.Logger.Warn("near cache flushed: announcements were lost", "cause", string(CauseGap), "publisher", m.Publisher,
			"missed", missed, "seq", m.Seq, "flushed", held)
	}
	if len(m.Tags) > 0 {
		c.forget(CauseTags)
	}
	for _, k := range m.Keys {
		for _, t := range c.tiers {
			t.drop(k)
		}
	}
	c.keys.Add(int64(len(m.Keys)))
	if !m.Heartbeat() {
		c.lag.Store(int64(time.Since(m.At)))
	}
	if c.opts.OnMessage != nil {
		c.opts.OnMessage(m, time.Now())
	}
}

// forgetPublishers stops following the publishers silent for an hour:
// processes gone.
func (c *Channel) forgetPublishers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seqs != nil {
		c.seqs.Forget(time.Now())
	}
}

// ErrAnnounce marks a Drop whose announcement could not be sent: the
// other processes see the gap at this one's next heartbeat, and flush.
var ErrAnnounce = errors.New("near: announcement not sent")

// announce tells the other processes of keys this one changed. While the
// subscription is down it is not even tried — the cache is most likely
// down too, and a write should not wait for it — and its number is
// skipped, which the others see as a gap.
func (c *Channel) announce(ctx context.Context, keys []string) error {
	if c.pub == nil || len(keys) == 0 {
		return nil
	}
	var err error
	if c.up.Load() {
		ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
		err = c.pub.Announce(ctx, time.Now(), keys, nil)
	} else {
		c.pub.Skip()
		err = errUnsubscribed
	}
	if err != nil {
		c.announceErrors.Add(1)
		return fmt.Errorf("%w: %w", ErrAnnounce, err)
	}
	c.announced.Add(1)
	return nil
}

func (c *Channel) beatFailed(err error) {
	c.announceErrors.Add(1)
	c.opts.Logger.Debug("near cache heartbeat not sent", "error", err.Error())
}

// ChannelStats count what a Channel did since it was opened.
type ChannelStats struct {
	Subscribed     bool
	Node           string          // the node subscribed on, or last subscribed on
	Messages       int64           // received, heartbeats included
	Keys           int64           // the keys they named, dropped from every tier
	Missed         int64           // messages missed: the gaps in the publishers' sequences
	Flushes        map[Cause]int64 // the tiers flushed, by cause
	Announced      int64           // this process's announcements sent
	AnnounceErrors int64           // of its announcements and heartbeats, those not sent
	Publishers     int             // followed on the subscription
	Lag            time.Duration   // the last announcement's, from its deletes to its drops here
}

// Stats tells what the channel did.
func (c *Channel) Stats() ChannelStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := ChannelStats{Subscribed: c.up.Load(), Node: c.node, Messages: c.messages.Load(), Keys: c.keys.Load(), Missed: c.missed.Load(),
		Flushes: maps.Clone(c.flushes), Announced: c.announced.Load(), AnnounceErrors: c.announceErrors.Load(), Lag: time.Duration(c.lag.Load())}
	if c.seqs != nil {
		s.Publishers = c.seqs.Publishers()
	}
	return s
}
