package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/writethrough"
	"github.com/invalidator-go/invalidator/writethrough/near"
)

// nearProcesses is how many service processes read through a local tier:
// each its own cache client, channel, and tiers, as on separate hosts. One
// more reads through a tier with StaleIfError.
const nearProcesses = 2

// staleIfError is that process's: longer than the longest outage, its
// MaxLifetime longer still, so that its reads are served from memory for
// all of it.
const staleIfError = 2 * time.Minute

// near are the readers through local tiers. Every hit is checked, once the
// run is over, against the announcements its process had applied before
// the read: a hit older than a change the source held before the deletes
// of such an announcement (its At) is stale.
type nearReaders struct {
	procs []*nearProcess
}

// nearProcess is one process: its channel, its caches with their local
// tier, and what it saw.
type nearProcess struct {
	kind            string // kindNear, or kindStaleIfError
	ch              *near.Channel
	tier            *near.Tier[item]
	products, users *writethrough.Cache[item]
	closeClient     func()

	mu    sync.Mutex
	hits  []nearHit
	drops map[string][]applied // by key, in the order applied
}

type nearHit struct {
	key     string
	version int64
	at      time.Time // when the read began
}

// applied is an announcement of a key applied by a process: its deletes
// were sent at deleted, and it was applied at at.
type applied struct {
	deleted, at time.Time
}

// startNear opens the local tiers' processes, their flushes logged to the
// run's log directory.
func (l *load) startNear(ctx context.Context) (*nearReaders, error) {
	logFile, err := os.Create(l.env.state + "/logs/near.log")
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(logFile, nil))
	opts := writethrough.Options[item]{TTL: time.Hour, VersionOf: func(v item) int64 { return v.Version }}
	n := &nearReaders{}
	for i := range nearProcesses + 1 {
		client, err := elasticache.New(l.env.cache)
		if err != nil {
			return nil, err
		}
		p := &nearProcess{kind: kindNear, drops: map[string][]applied{}, closeClient: client.Close}
		p.ch = near.Open(client, near.ChannelOptions{Channel: os.Getenv("ANNOUNCE_CHANNEL"), Logger: logger.With("process", i), OnMessage: p.applied})
		tierOpts, o := near.Options{MaxEntries: 10_000, MaxLifetime: 5 * time.Minute}, opts
		if i == nearProcesses {
			// A bound on its loads above its readers: nothing sheds but in
			// an outage, and then only what the tier does not hold.
			p.kind, tierOpts.StaleIfError, o.MaxConcurrentLoads = kindStaleIfError, staleIfError, 16
		}
		p.tier = near.New[item](p.ch, tierOpts)
		o.Local = recorder{p.tier, p}
		p.products, p.users = writethrough.New[item](client, o), writethrough.New[item](client, o)
		n.procs = append(n.procs, p)
	}
	return n, nil
}

// recorder is a process's tier, noting every hit.
type recorder struct {
	*near.Tier[item]
	p *nearProcess
}

func (r recorder) Get(key string) (item, bool, bool) {
	start := time.Now()
	v, notFound, ok := r.Tier.Get(key)
	if ok && !notFound {
		r.p.mu.Lock()
		r.p.hits = append(r.p.hits, nearHit{key, v.Version, start})
		r.p.mu.Unlock()
	}
	return v, notFound, ok
}

// applied notes the announced keys of the readers' entities.
func (p *nearProcess) applied(m announce.Message, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range m.Keys {
		if strings.HasPrefix(k, "cache:product:") || strings.HasPrefix(k, "cache:user:") {
			p.drops[k] = append(p.drops[k], applied{m.At, at})
		}
	}
}

// readers starts each process's readers of both entities, under l's
// readers.
func (n *nearReaders) readers(l *load) {
	for _, p := range n.procs {
		for range 2 {
			l.readers.Go(func() {
				l.read(l.readCtx, "product", func(ctx context.Context, id string) error {
					return readThrough(ctx, &l.wt, p.kind, p.products, "cache:product:"+id, l.loadProduct(id))
				})
			})
			l.readers.Go(func() {
				l.read(l.readCtx, "user", func(ctx context.Context, id string) error {
					return readThrough(ctx, &l.wt, p.kind, p.users, "cache:user:"+id, l.loadRecorded("user", id))
				})
			})
		}
	}
}

// nearCounts are what the local tiers did, and the stale hits among them.
type nearCounts struct {
	hits, stale, kept, refused, messages int64
	staleReads                           int64         // served by StaleIfError
	staleOldest                          time.Duration // the most stale of them
	flushes                              map[near.Cause]int64
	notes                                []string
}

// check counts the stale hits of every process, and what the tiers did.
func (n *nearReaders) check(l *load) nearCounts {
	c := nearCounts{flushes: map[near.Cause]int64{}}
	for _, p := range n.procs {
		s, cs := p.tier.Stats(), p.ch.Stats()
		c.kept, c.refused, c.messages = c.kept+s.Kept, c.refused+s.Refused, c.messages+cs.Messages
		c.staleReads, c.staleOldest = c.staleReads+s.StaleReads, max(c.staleOldest, s.StaleOldest)
		for cause, k := range cs.Flushes {
			c.flushes[cause] += k
		}
		p.mu.Lock()
		for _, h := range p.hits {
			c.hits++
			deleted, ok := lastBefore(p.drops[h.key], h.at)
			if !ok {
				continue
			}
			entity := strings.TrimPrefix(h.key, "cache:")
			if want := l.versionBefore(entity, deleted); h.version < want {
				c.stale++
				if len(c.notes) < 5 {
					c.notes = append(c.notes, fmt.Sprintf("stale local hit: %s v%d at %s, after an announcement of deletes at %s, when the source had v%d",
						h.key, h.version, h.at.Format(time.StampMicro), deleted.Format(time.StampMicro), want))
				}
			}
		}
		p.mu.Unlock()
	}
	return c
}

// lastBefore is the latest time deletes were sent among the announcements
// applied before t.
func lastBefore(drops []applied, t time.Time) (deleted time.Time, ok bool) {
	for _, d := range drops {
		if d.at.Before(t) && d.deleted.After(deleted) {
			deleted, ok = d.deleted, true
		}
	}
	return deleted, ok
}

// versionBefore is the version of an entity ("product:p-1") the source
// held, its write done, before t.
func (l *load) versionBefore(entity string, t time.Time) (v int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.history[entity] {
		if s.done.Before(t) {
			v = max(v, s.version)
		}
	}
	return v
}

func (c nearCounts) print(line func(string, any)) bool {
	line("stale_local", c.stale)
	line("local_hits", c.hits)
	line("local_kept", c.kept)
	line("local_refused", c.refused)
	line("local_messages", c.messages)
	causes := slices.Sorted(func(yield func(near.Cause) bool) {
		for cause := range c.flushes {
			if !yield(cause) {
				return
			}
		}
	})
	for _, cause := range causes {
		line("local_flushes_"+string(cause), c.flushes[cause])
	}
	line("stale_if_error_reads", c.staleReads)
	line("stale_if_error_oldest_ms", c.staleOldest.Milliseconds())
	return c.stale == 0 && c.hits > 0 && c.staleOldest <= staleIfError
}

func (n *nearReaders) close() {
	for _, p := range n.procs {
		p.tier.Close()
		p.ch.Close()
		p.closeClient()
	}
}
