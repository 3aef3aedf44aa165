package announce

import (
	"context"
	"crypto/rand"
	"sync/atomic"
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

	turn chan struct{} // held while a message is in flight
	// Held with turn:
	seq    uint64
	prev   time.Time     // when the last number was taken
	failed uint64        // messages not sent since the last one sent
	gap    time.Duration // until the next confirmation; 0: none owed
	next   time.Time     // when it is due

	unsent atomic.Uint64 // messages given up before their turn: failed, told at the next one
}

// The confirmations of a publisher's last message or failure: heartbeats
// 1, 2, 4 … 32 s apart, so that a loss that outlasts a few of them still
// shows before writethrough/near's default MaxLifetime ends; then it is
// quiet, so that a fleet's idle processes send nothing.
const (
	firstConfirmation = time.Second
	lastConfirmation  = 32 * time.Second
)

// NewPublisher returns a publisher on channel, with an ID of its own.
func NewPublisher(send Sender, channel string) *Publisher {
	return &Publisher{send: send, channel: channel, id: rand.Text()[:16], since: time.Now(), turn: make(chan struct{}, 1)}
}

// ID identifies the publisher in its messages.
func (p *Publisher) ID() string { return p.id }

// Announce publishes keys and tags, deleted at at, as one message. A
// message that could not be sent, even one given up while it waited for
// its turn, is told in the next one sent, a heartbeat at the latest
// (Message.Failed): the subscribers forget what they hold.
func (p *Publisher) Announce(ctx context.Context, at time.Time, keys, tags []string) error {
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		p.unsent.Add(1)
		return ctx.Err()
	}
	defer func() { <-p.turn }()
	err := p.announce(ctx, at, keys, tags)
	p.owe()
	return err
}

// announce numbers and sends the next message; turn is held.
func (p *Publisher) announce(ctx context.Context, at time.Time, keys, tags []string) error {
	p.seq++
	m := Message{Publisher: p.id, Since: p.since, Seq: p.seq, Prev: p.prev, At: at, Keys: keys, Tags: tags,
		Failed: p.failed + p.unsent.Swap(0)}
	p.prev = time.Now()
	err := ctx.Err()
	if err == nil {
		err = p.send.Publish(ctx, p.channel, m.Encode())
	}
	if err != nil {
		p.failed = m.Failed + 1
		p.owe()
		return err
	}
	p.failed = 0
	return nil
}

// owe starts the confirmations over; turn is held.
func (p *Publisher) owe() {
	p.gap, p.next = firstConfirmation, time.Now().Add(firstConfirmation)
}

// Skip takes a number without sending anything, for a message that could
// not be sent anyway: it counts as failed.
func (p *Publisher) Skip() {
	p.turn <- struct{}{}
	defer func() { <-p.turn }()
	p.seq++
	p.prev = time.Now()
	p.failed++
	p.owe()
}

// Heartbeat publishes a message without keys: the publisher's number so
// far, which shows the subscribers any message of it they missed. While a
// message is in flight it sends none: that one carries a later number.
func (p *Publisher) Heartbeat(ctx context.Context) error { return p.heartbeat(ctx, false) }

// Beat sends the confirmations owed, checking every interval and sending
// each within it, until ctx ends; failed tells each error.
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

// heartbeat sends one, or when owed only if a confirmation is due or a
// message was given up; one sent puts the next confirmation twice as far.
func (p *Publisher) heartbeat(ctx context.Context, owed bool) error {
	select {
	case p.turn <- struct{}{}:
	default:
		return nil
	}
	defer func() { <-p.turn }()
	due := p.gap > 0 && !time.Now().Before(p.next) || p.unsent.Load() > 0
	if owed && !due {
		return nil
	}
	if err := p.announce(ctx, time.Now(), nil, nil); err != nil {
		return err
	}
	if due {
		if p.gap *= 2; p.gap > lastConfirmation {
			p.gap = 0
		}
		p.next = time.Now().Add(p.gap)
	}
	return nil
}
