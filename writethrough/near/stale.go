package near

import (
	"sync"
	"time"
)

// kept is what a tier held when it lost its subscription, and what its
// process loaded from the source since, for Options.StaleIfError: served
// only while the shared cache does not answer.
type kept[V any] struct {
	mu      sync.Mutex
	entries map[string]keptEntry[V]
	bytes   uint64 // their weight, when the tier is bounded by MaxBytes
}

type keptEntry[V any] struct {
	held[V]
	vouched time.Time // the entry was current then
}

// keep starts keeping, on a flush for cause: what the tier holds, current
// when the subscription was last heard (vouched). Only when the
// subscription is lost, as when the cache goes down, and only the first
// time, so that nothing kept is vouched for later than it was. t.flush is
// held.
func (t *Tier[V]) keep(cause Cause, vouched time.Time) {
	switch {
	case cause == CauseClosed:
		t.kept.Store(nil)
	case t.staleIfError <= 0 || cause != CauseLost && cause != CauseSilent || t.kept.Load() != nil:
	default:
		k := &kept[V]{entries: make(map[string]keptEntry[V], t.store.EstimatedSize())}
		for key, h := range t.store.All() {
			k.entries[key] = keptEntry[V]{h, vouched}
			k.bytes += uint64(h.size)
		}
		t.kept.Store(k)
	}
}

// keepLoaded keeps what this process loaded from the source for key while
// the shared cache did not answer, current when the read began (since),
// unless the cache answered since, or the tier is full. The caller holds
// key's stripe, and found it not dropped since.
func (t *Tier[V]) keepLoaded(k *kept[V], key string, h held[V], since time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	old, had := k.entries[key]
	full := t.maxBytes > 0 && k.bytes+uint64(h.size) > t.maxBytes || t.maxBytes == 0 && len(k.entries) >= t.maxEntries
	if t.kept.Load() != k || full && !had {
		return
	}
	k.bytes += uint64(h.size) - uint64(old.size)
	k.entries[key] = keptEntry[V]{h, since}
}

// Stale is writethrough.Local's: what the tier kept for key since it lost
// its subscription, if it was current within StaleIfError, and would still
// be held (MaxLifetime, its expiry in the shared cache): what bounds the
// staleness of a held entry should a lost announcement go unseen bounds it
// here too.
func (t *Tier[V]) Stale(key string) (v V, notFound, ok bool) {
	k := t.kept.Load()
	if k == nil {
		return v, false, false
	}
	k.mu.Lock()
	e, ok := k.entries[key]
	k.mu.Unlock()
	now := time.Now()
	age := now.Sub(e.vouched)
	if !ok || age > t.staleIfError || !now.Before(e.until) {
		return v, false, false
	}
	t.staleReads.Add(1)
	for old := t.staleOldest.Load(); int64(age) > old && !t.staleOldest.CompareAndSwap(old, int64(age)); old = t.staleOldest.Load() {
	}
	return e.v, e.notFound, true
}

// Answered is writethrough.Local's: the shared cache answered, so nothing
// kept is served any more. The channel says so too when it subscribes.
func (t *Tier[V]) Answered() {
	if t.kept.Load() != nil {
		t.kept.Store(nil)
	}
}

// unkeep drops key from what is kept: this process wrote it.
func (t *Tier[V]) unkeep(key string) {
	if k := t.kept.Load(); k != nil {
		k.mu.Lock()
		if e, ok := k.entries[key]; ok {
			k.bytes -= uint64(e.size)
			delete(k.entries, key)
		}
		k.mu.Unlock()
	}
}
