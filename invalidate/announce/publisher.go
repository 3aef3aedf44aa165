package announce

import (
	"context"
	"crypto/rand"
	"sync"
	"time"
)

// Sender publishes one message on a channel; Valkey is one.
type Sender interface {
	Publish(ctx context.Context, channel, message string) error
}

// Publisher numbers and sends one process's messages. It sends one at a
// time, so that they arrive in the order of their numbers. It is safe for
// concurrent use.
type Publisher struct {
	send    Sender
	channel string
	id      string
	since   time.Time

	mu     sync.Mutex // held while a message is in flight
	seq    uint64
	failed uint64 // messages not sent since the last one sent
	owed   int    // heartbeats Beat still sends to confirm the last message
}

// confirmations is how many heartbeats follow a publisher's last message
// or skip, one each interval: enough that a subscriber misses neither
// that message nor its gap, with a heartbeat lost too; then it is quiet,
// so that a fleet's idle processes send nothing.
const confirmations = 3

// NewPublisher returns a publisher on channel, with an ID of its own.
func NewPublisher(send Sender, channel string) *Publisher {
	return &Publisher{send: send, channel: channel, id: rand.Text()[:16], since: time.Now()}
}

// ID identifies the publisher in its messages.
func (p *Publisher) ID() string { return p.id }

// Announce publishes keys and tags, deleted at at, as one message. A
// message that could not be sent keeps its number all the same, and the
// next one sent, a heartbeat at the latest, says it failed: the
// subscribers forget what they hold.
func (p *Publisher) Announce(ctx context.Context, at time.Time, keys, tags []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.announce(ctx, at, keys, tags); err != nil {
		return err
	}
	p.owed = confirmations
	return nil
}

// announce sends the next message; p.mu is held. One whose context ended
// while it waited for its turn takes no number: nothing was tried.
func (p *Publisher) announce(ctx context.Context, at time.Time, keys, tags []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.seq++
	m := Message{Publisher: p.id, Since: p.since, Seq: p.seq, At: at, Keys: keys, Tags: tags, Failed: p.failed}
	if err := p.send.Publish(ctx, p.channel, m.Encode()); err != nil {
		p.failed++
		p.owed = confirmations // its failure must show
		return err
	}
	p.failed = 0
	return nil
}

// Skip takes a number without sending anything, for a message that could
// not be sent anyway: it counts as failed.
func (p *Publisher) Skip() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	p.failed++
	p.owed = confirmations
}

// Heartbeat publishes a message without keys: the publisher's number so
// far, which shows the subscribers any message of it they missed. While a
// message is in flight it sends none: that one carries a later number.
func (p *Publisher) Heartbeat(ctx context.Context) error { return p.heartbeat(ctx, false) }

// Beat sends a heartbeat every interval, each within it, while the last
// message or skip is not yet confirmed, until ctx ends; failed tells each
// error.
func (p *Publisher) Beat(ctx context.Context, every time.Duration, failed func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		beat, cancel := context.WithTimeout(ctx, every)
		if err := p.heartbeat(beat, true); err != nil && ctx.Err() == nil {
			failed(err)
		}
		cancel()
	}
}

// heartbeat sends one, or when owed only if one is owed; each sent counts
// as a confirmation.
func (p *Publisher) heartbeat(ctx context.Context, owed bool) error {
	if !p.mu.TryLock() {
		return nil
	}
	defer p.mu.Unlock()
	if owed && p.owed == 0 {
		return nil
	}
	if err := p.announce(ctx, time.Now(), nil, nil); err != nil {
		return err
	}
	p.owed = max(p.owed-1, 0)
	return nil
}
