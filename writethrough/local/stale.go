package local

import (
	"sync"
	"time"
)

// kept is what a tier held when it lost its subscription, for
// Options.StaleIfError: served only while the shared cache does not answer.
type kept[V any] struct {
	vouched time.Time // when the subscription was last heard: the entries were current then
	mu      sync.Mutex
	entries map[string]held[V]
}

// keep takes what the tier holds as kept, on a flush for cause: only when
// the subscription is lost, as when the cache goes down, and only the
// first time, so that what is kept is never vouched for later than it
// was. t.flush is held.
func (t *Tier[V]) keep(cause Cause, vouched time.Time) {
	switch {
	case cause == CauseClosed:
		t.kept.Store(nil)
	case t.staleIfError <= 0 || cause != CauseLost && cause != CauseSilent || t.kept.Load() != nil:
	default:
		k := &kept[V]{vouched: vouched, entries: make(map[string]held[V], t.store.EstimatedSize())}
		for key, h := range t.store.All() {
			k.entries[key] = h
		}
		if len(k.entries) > 0 {
			t.kept.Store(k)
		}
	}
}

// Stale is writethrough.Local's: what the tier kept for key when it lost
// its subscription, for up to StaleIfError after it last heard it.
func (t *Tier[V]) Stale(key string) (v V, notFound, ok bool) {
	k := t.kept.Load()
	if k == nil {
		return v, false, false
	}
	age := time.Since(k.vouched)
	if age > t.staleIfError {
		t.kept.CompareAndSwap(k, nil)
		return v, false, false
	}
	k.mu.Lock()
	h, ok := k.entries[key]
	k.mu.Unlock()
	if !ok {
		return v, false, false
	}
	t.staleReads.Add(1)
	for old := t.staleOldest.Load(); int64(age) > old && !t.staleOldest.CompareAndSwap(old, int64(age)); old = t.staleOldest.Load() {
	}
	return h.v, h.notFound, true
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
		delete(k.entries, key)
		k.mu.Unlock()
	}
}
