package main

import (
	"cmp"
	"io"
	"log/slog"
	"time"

	"github.com/invalidator-go/invalidator/cmd/invalidator/internal/inspect"
	"github.com/invalidator-go/invalidator/writethrough/near"
)

// nearTier is inspect --local's tier and its channel; nil without --local.
type nearTier struct {
	ch   *near.Channel
	tier *near.Tier[[]byte]
}

// openNear subscribes, as a user that may not publish, to the channel the
// worker announces on, with a tier of raw entries whose keys live at most
// lifetime; its flushes are logged to stderr.
func openNear(s session, lifetime time.Duration, stderr io.Writer) *nearTier {
	ch := near.Open(s.cache, near.ChannelOptions{Channel: cmp.Or(s.cfg.AnnounceChannel, "invalidator:near"), ReadOnly: true,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	return &nearTier{ch: ch, tier: near.New[[]byte](ch, near.Options{MaxEntries: 1_000_000, MaxLifetime: lifetime})}
}

func (n *nearTier) close() {
	n.tier.Close()
	n.ch.Close()
}

// report is what the tier did; nil without one.
func (n *nearTier) report() *inspect.NearReport {
	if n == nil {
		return nil
	}
	t, c := n.tier.Stats(), n.ch.Stats()
	flushes := map[string]int64{}
	for cause, count := range c.Flushes {
		flushes[string(cause)] = count
	}
	return &inspect.NearReport{Hits: t.Hits, Kept: t.Kept, Dropped: t.Dropped, Messages: c.Messages, Flushes: flushes}
}
