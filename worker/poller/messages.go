package poller

import (
	"context"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/worker/queues"
)

// delete deletes messages done with, by their receipt handles. The
// batch's own time may be spent: deleting gets time of its own, or
// successes would come back and count toward the DLQ.
func (p *poller) delete(handles []string) {
	if len(handles) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := queues.Delete(ctx, p.client, p.opts.QueueURL, handles); err != nil {
		// The messages were invalidated; they come back and are
		// invalidated again, which is harmless.
		p.opts.Logger.Warn("delete failed: the messages will be redelivered", "messages", len(handles), "error", err.Error())
	}
}

// handBack makes messages visible again after after(message).
func (p *poller) handBack(msgs []queues.Message, after func(queues.Message) time.Duration) error {
	if len(msgs) == 0 {
		return nil
	}
	back := make([]queues.Return, len(msgs))
	for i, m := range msgs {
		back[i] = queues.Return{Handle: m.Handle, After: after(m)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return queues.HandBack(ctx, p.client, p.opts.QueueURL, back)
}

// extendVisibility keeps a slow batch's messages hidden until it ends.
func (p *poller) extendVisibility(ctx context.Context, msgs []queues.Message) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(p.opts.VisibilityTimeout / 2)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := p.handBack(msgs, func(queues.Message) time.Duration { return p.opts.VisibilityTimeout }); err != nil {
					p.opts.Logger.Warn("visibility extension failed", "messages", len(msgs), "error", err.Error())
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}
