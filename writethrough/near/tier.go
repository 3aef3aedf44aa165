package near

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/invalidator-go/invalidator/invalidate/announce"
)

// Options bound a Tier. The zero value gives the defaults.
type Options struct {
	// MaxEntries bounds how many keys the tier holds; the least likely to
	// be read again go first (otter's W-TinyLFU). Default 10,000, unless
	// MaxBytes is set.
	MaxEntries int
	// MaxBytes, when set, bounds the tier by size instead: each entry
	// counts its key, its value's size in the shared cache and
	// entryOverhead bytes.
	MaxBytes uint64
	// MaxLifetime is the longest an entry is served from memory, and so the
	// bound of its staleness should every signal of a lost announcement
	// fail. Never past the entry's expiry in the shared cache either.
	// Default 1 minute; at most announce.ForgetAfter.
	MaxLifetime time.Duration
	// StaleIfError, opt-in, keeps what the tier holds when it loses its
	// subscription — its connection ended or went silent, as when the
	// shared cache goes down — and what this process loads from the source
	// meanwhile, and serves them while the shared cache does not answer this
	// process, each for up to StaleIfError after it was last known current
	// (the subscription last heard; the load begun): at most that much
	// staleness, in exchange for reads that do not all go to the database
	// during an outage. A key this process writes is dropped from it at
	// once; all of it is dropped as soon as the shared cache answers, or the
	// subscription is back. It holds no more than the tier does. Default 0:
	// nothing is kept.
	StaleIfError time.Duration
}

// entryOverhead is about what an entry costs the store beside its key and
// value, as make bench measures it (local_bytes_per_entry).
const entryOverhead = 100

// stripes spread the keys' drop counts: a read is kept only if no key of
// its stripe was dropped since it began. More of them refuse fewer reads
// under many drops.
const stripes = 4096

// Tier is a local tier of values of type V, a writethrough.Local. It is
// safe for concurrent use.
type Tier[V any] struct {
	ch           *Channel
	store        *otter.Cache[string, held[V]]
	lifetime     time.Duration
	staleIfError time.Duration
	maxEntries   int    // the store's bound, and what is kept's
	maxBytes     uint64 // the same, by weight; 0: by entries
	seed         maphash.Seed
	kept         atomic.Pointer[kept[V]] // StaleIfError's; nil: none

	// Reads kept hold flush shared, a flush exclusively: no read that began
	// before a flush is kept after it.
	flush   sync.RWMutex
	epoch   atomic.Uint64
	stripes [stripes]stripe

	hits, misses, kepts, refused, dropped atomic.Int64
	staleReads, staleOldest               atomic.Int64
}

// held is what the tier holds for a key.
type held[V any] struct {
	v        V
	notFound bool
	size     uint32        // its key's, its value's in the shared cache, and entryOverhead
	life     time.Duration // how long it is held
	until    time.Time     // when that ends
}

// stripe counts the drops of its keys; a drop and a kept read of them
// hold mu, so that one is wholly before the other.
type stripe struct {
	mu    sync.Mutex
	drops uint64
}

// New returns a tier that ch keeps consistent.
func New[V any](ch *Channel, opts Options) *Tier[V] {
	if opts.MaxLifetime <= 0 {
		opts.MaxLifetime = time.Minute
	}
	opts.MaxLifetime = min(opts.MaxLifetime, announce.ForgetAfter)
	o := &otter.Options[string, held[V]]{
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, held[V]]) time.Duration { return e.Value.life }),
	}
	switch {
	case opts.MaxBytes > 0:
		o.MaximumWeight = opts.MaxBytes
		o.Weigher = func(_ string, h held[V]) uint32 { return h.size }
	case opts.MaxEntries > 0:
		o.MaximumSize = opts.MaxEntries
	default:
		o.MaximumSize = 10_000
	}
	t := &Tier[V]{ch: ch, store: otter.Must(o), lifetime: opts.MaxLifetime, staleIfError: max(opts.StaleIfError, 0), seed: maphash.MakeSeed(),
		maxEntries: o.MaximumSize, maxBytes: o.MaximumWeight}
	ch.join(t)
	return t
}

// Get is writethrough.Local's: what the tier holds for key.
func (t *Tier[V]) Get(key string) (v V, notFound, ok bool) {
	if !t.ch.live() {
		t.misses.Add(1)
		return v, false, false
	}
	h, ok := t.store.GetIfPresent(key)
	if !ok {
		t.misses.Add(1)
		return v, false, false
	}
	t.hits.Add(1)
	return h.v, h.notFound, true
}

// Reserve is writethrough.Local's: what keeps a read of key that begins
// now, unless key is dropped or the tier flushed before it is kept. While
// the channel is not subscribed, nil; or, while the tier keeps what it held
// for StaleIfError, what keeps a value loaded from the source meanwhile,
// with what it held, until the shared cache answers.
func (t *Tier[V]) Reserve(key string) func(v V, notFound bool, size int, expiry time.Time) {
	// The epoch before the state: a flush between the two is seen by
	// either.
	epoch := t.epoch.Load()
	k := t.kept.Load()
	subscribed := t.ch.Subscribed()
	if !subscribed && k == nil {
		return nil
	}
	since := time.Now()
	s := &t.stripes[maphash.String(t.seed, key)%stripes]
	s.mu.Lock()
	drops := s.drops
	s.mu.Unlock()
	size := func(n int) uint32 { return uint32(min(len(key)+n+entryOverhead, 1<<31)) }
	if !subscribed {
		return func(v V, notFound bool, n int, expiry time.Time) {
			until := since.Add(min(t.lifetime, expiry.Sub(since)))
			t.flush.RLock()
			defer t.flush.RUnlock()
			s.mu.Lock()
			defer s.mu.Unlock()
			// Not the epoch: the flushes of the attempts to subscribe again
			// leave what is kept as it was.
			if s.drops == drops {
				t.keepLoaded(k, key, held[V]{v: v, notFound: notFound, size: size(max(n, 0)), until: until}, since)
			}
		}
	}
	return func(v V, notFound bool, n int, expiry time.Time) {
		life := min(t.lifetime, time.Until(expiry))
		if life <= 0 || n < 0 { // a value loaded while the cache did not answer is only for StaleIfError
			return
		}
		t.flush.RLock()
		defer t.flush.RUnlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if t.epoch.Load() != epoch || s.drops != drops {
			t.refused.Add(1)
			return
		}
		t.store.Set(key, held[V]{v: v, notFound: notFound, size: size(n), life: life, until: time.Now().Add(life)})
		t.kepts.Add(1)
	}
}

// Drop is writethrough.Local's: it forgets keys in this tier at once, and
// announces them to the other processes. An announcement that could not
// be sent shows as a gap to the others, who then flush.
func (t *Tier[V]) Drop(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		t.drop(k)
	}
	return t.ch.announce(ctx, keys)
}

// drop forgets key, and fails the reads of its stripe in flight.
func (t *Tier[V]) drop(key string) {
	// Wholly before a flush that keeps what the tier holds, or after it.
	t.flush.RLock()
	defer t.flush.RUnlock()
	s := &t.stripes[maphash.String(t.seed, key)%stripes]
	s.mu.Lock()
	s.drops++
	t.store.Invalidate(key)
	s.mu.Unlock()
	t.unkeep(key)
	t.dropped.Add(1)
}

// forget flushes the tier, for cause: it holds nothing, and keeps no read
// in flight; what it held may be kept for StaleIfError, as it was at
// vouched.
func (t *Tier[V]) forget(cause Cause, vouched time.Time) (held int) {
	t.flush.Lock()
	defer t.flush.Unlock()
	t.epoch.Add(1)
	t.keep(cause, vouched)
	held = t.store.EstimatedSize()
	t.store.InvalidateAll()
	return held
}

// TierStats count what a Tier did since it was made.
type TierStats struct {
	Hits, Misses int64
	Kept         int64  // reads from the shared cache kept
	Refused      int64  // reads not kept: their key dropped, or the tier flushed, while they ran
	Dropped      int64  // keys dropped, by announcements and by this process's writes, held or not
	Entries      int    // held now, some perhaps expired
	Bytes        uint64 // their weight, when the tier is bounded by MaxBytes
	// StaleReads were served from what was kept for StaleIfError while the
	// shared cache did not answer; StaleOldest is the most stale of them:
	// how long after the subscription was last heard.
	StaleReads  int64
	StaleOldest time.Duration
}

// Stats tells what the tier did, and holds.
func (t *Tier[V]) Stats() TierStats {
	return TierStats{Hits: t.hits.Load(), Misses: t.misses.Load(), Kept: t.kepts.Load(), Refused: t.refused.Load(),
		Dropped: t.dropped.Load(), Entries: t.store.EstimatedSize(), Bytes: t.store.WeightedSize(),
		StaleReads: t.staleReads.Load(), StaleOldest: time.Duration(t.staleOldest.Load())}
}

// Close leaves the channel and stops the store's clean-ups; the tier holds
// nothing more.
func (t *Tier[V]) Close() {
	t.ch.leave(t)
	t.forget(CauseClosed, time.Time{})
	t.store.StopAllGoroutines()
}
