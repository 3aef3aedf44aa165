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

	mu  sync.Mutex // held while a message is in flight
	seq uint64
}

// NewPublisher returns a publisher on channel, with an ID of its own.
func NewPublisher(send Sender, channel string) *Publisher {
	return &Publisher{send: send, channel: channel, id: rand.Text()[:16], since: time.Now()}
}

// ID identifies the publisher in its messages.
func (p *Publisher) ID() string { return p.id }

// Announce publishes keys and tags, deleted at at, as one message. A
// message that could not be sent keeps its number all the same: the
// subscribers see the gap at the next one, a heartbeat at the latest, and
// forget what they hold.
func (p *Publisher) Announce(ctx context.Context, at time.Time, keys, tags []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.announce(ctx, at, keys, tags)
}

// announce sends the next message; p.mu is held. One whose context ended
// while it waited for its turn takes no number: nothing was tried.
func (p *Publisher) announce(ctx context.Context, at time.Time, keys, tags []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.seq++
	m := Message{Publisher: p.id, Since: p.since, Seq: p.seq, At: at, Keys: keys, Tags: tags}
	return p.send.Publish(ctx, p.channel, m.Encode())
}

// Skip takes a number without sending anything, for a message that could
// not be sent anyway: the subscribers see the gap at the next one.
func (p *Publisher) Skip() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
}

// Heartbeat publishes a message without keys: the publisher's number so
// far, which shows the subscribers any message of it they missed. While a
// message is in flight it sends none: that one carries a later number.
func (p *Publisher) Heartbeat(ctx context.Context) error {
	if !p.mu.TryLock() {
		return nil
	}
	defer p.mu.Unlock()
	return p.announce(ctx, time.Now(), nil, nil)
}

// Beat sends a heartbeat every interval until ctx ends, each within the
// interval; failed tells each error.
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
		if err := p.Heartbeat(beat); err != nil && ctx.Err() == nil {
			failed(err)
		}
		cancel()
	}
}
