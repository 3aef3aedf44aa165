package near

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// subscribe keeps a subscription until ctx ends: one node after another,
// since a cluster delivers every PUBLISH on every node, and again after a
// pause when one ends.
func (c *Channel) subscribe(ctx context.Context, client valkey.Client) {
	pause := 50 * time.Millisecond
	for attempt := 0; ctx.Err() == nil; attempt++ {
		c.mu.Lock()
		session := c.session
		c.mu.Unlock()
		confirmed, cause, err := c.session1(ctx, client, session, attempt)
		if ctx.Err() != nil {
			return // Close flushes
		}
		c.lost(session, cause, err)
		if confirmed {
			pause = 50 * time.Millisecond
		}
		wait.For(ctx, pause)
		pause = min(2*pause, time.Second)
	}
}

// session1 subscribes on one node and returns when the subscription ends,
// and why; confirmed says whether it was.
func (c *Channel) session1(ctx context.Context, client valkey.Client, session uint64, attempt int) (confirmed bool, cause Cause, err error) {
	nodes := client.Nodes()
	addrs := slices.Sorted(func(yield func(string) bool) {
		for a := range nodes {
			if !yield(a) {
				return
			}
		}
	})
	if len(addrs) == 0 {
		return false, CauseLost, errors.New("no node to subscribe on")
	}
	addr := addrs[attempt%len(addrs)]
	dc, release := nodes[addr].Dedicate()
	defer release()
	defer dc.Close() // a connection subscribed goes, not back to the pool
	ok := make(chan struct{}, 1)
	ended := dc.SetPubSubHooks(valkey.PubSubHooks{
		OnMessage: func(m valkey.PubSubMessage) { c.receive(session, m.Message) },
		OnSubscription: func(s valkey.PubSubSubscription) {
			if s.Kind == "subscribe" && s.Channel == c.opts.Channel {
				c.subscribed(session, time.Now(), addr)
				select {
				case ok <- struct{}{}:
				default:
				}
			}
		},
	})
	if err := dc.Do(ctx, dc.B().Subscribe().Channel(c.opts.Channel).Build()).Error(); err != nil {
		return false, CauseLost, err
	}
	tick := time.NewTicker(c.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ok:
			confirmed, ok = true, nil
		case err := <-ended:
			if err == nil {
				err = errors.New("unsubscribed")
			}
			return confirmed, CauseLost, err
		case <-ctx.Done():
			return confirmed, CauseClosed, ctx.Err()
		case <-tick.C:
			// A node that hangs keeps its connections open: only a
			// question unanswered shows it, on this connection, whatever
			// the others publish.
			// Its answer vouches for when it was sent, not received: a
			// process frozen in between has messages waiting behind it.
			sent := time.Now()
			ping, cancel := context.WithTimeout(ctx, c.opts.Silence)
			err := dc.Do(ping, dc.B().Ping().Build()).Error()
			cancel()
			if err != nil && ctx.Err() == nil {
				return confirmed, CauseSilent, err
			}
			if err == nil {
				c.hear(sent)
			}
			c.forgetPublishers()
		}
	}
}
