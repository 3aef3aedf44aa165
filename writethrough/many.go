package writethrough

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/valkey-io/valkey-go"
)

// ManyError is GetMany's error when some keys have no answer: Failed names
// each with its error, and the values of the others are returned.
type ManyError struct {
	Failed map[string]error
}

func (e *ManyError) Error() string {
	keys := slices.Sorted(maps.Keys(e.Failed))
	var b strings.Builder
	fmt.Fprintf(&b, "writethrough: %d of the keys failed", len(keys))
	for i, k := range keys {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(keys)-i)
			break
		}
		fmt.Fprintf(&b, "; %s: %v", k, e.Failed[k])
	}
	return b.String()
}

// Unwrap gives the keys' errors, sorted by key, for errors.Is.
func (e *ManyError) Unwrap() []error {
	keys := slices.Sorted(maps.Keys(e.Failed))
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = e.Failed[k]
	}
	return errs
}

// GetMany returns the values of keys, as Get does each, in a few round
// trips whatever their number: one to read them all (each node's at once,
// in parallel), one to lease the misses, one to fill them. The misses are
// loaded with one call of load per MaxBatch keys; a key that load leaves
// out of its map does not exist, and is cached as "not found", as Get's
// ErrNotFound. The map returned holds the keys that exist; a key read
// twice is read once; no keys, no call. When some keys fail, their errors
// are in a *ManyError, and the others are answered. Like Get, it returns
// when ctx ends even if load does not: the keys still loading fail with
// ctx's error, and their load fills them or gives their leases back when
// it ends. No pipeline holds more than 1,000 commands.
func (c *Cache[V]) GetMany(ctx context.Context, keys []string, load func(ctx context.Context, keys []string) (map[string]V, error)) (map[string]V, error) {
	m := &many[V]{c: c, load: load, found: make(map[string]V, len(keys)), failed: map[string]error{}}
	if c.opts.Local != nil {
		m.keepers = map[string]keeper[V]{}
	}
	var pending []string
	for _, k := range uniq(keys) {
		v, err, keep, ok := c.fromLocal(k)
		if ok {
			m.answer(k, v, err)
			continue
		}
		if keep != nil {
			m.keepers[k] = keep
		}
		pending = append(pending, k)
	}
	for range maxAttempts {
		if len(pending) == 0 {
			break
		}
		pending = m.pass(ctx, pending)
	}
	m.direct(ctx, pending, false)
	if len(m.failed) > 0 {
		return m.found, &ManyError{Failed: m.failed}
	}
	return m.found, nil
}

// many is one GetMany call: what it answered so far.
type many[V any] struct {
	c       *Cache[V]
	load    func(ctx context.Context, keys []string) (map[string]V, error)
	mu      sync.Mutex // loads of several batches answer at once
	found   map[string]V
	failed  map[string]error
	keepers map[string]keeper[V]
	// left are the keys whose loads the caller stopped waiting for
	// (chunks): their answer is its context's error, whatever the loads say.
	left map[string]struct{}
}

// answer notes the answer for key, as Get would return it.
func (m *many[V]) answer(key string, v V, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.left[key]; ok {
		return
	}
	switch {
	case err == nil:
		m.found[key] = v
	case !errors.Is(err, ErrNotFound):
		m.failed[key] = err
	}
}

// one loads key alone with the batch loader: for an early refresh.
func (m *many[V]) one(key string) func(context.Context) (V, error) {
	return func(ctx context.Context) (V, error) {
		vs, err := m.batch(ctx, []string{key})
		v, ok := vs[key]
		if err == nil && !ok {
			err = ErrNotFound
		}
		return v, err
	}
}

// batch calls the loader, turning a panic into an error as Get does, so
// that the leases of its keys are given back; not once ctx has ended: no
// one waits for it then (chunks), and the leases go back at once.
func (m *many[V]) batch(ctx context.Context, keys []string) (vs map[string]V, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			vs, err = nil, fmt.Errorf("writethrough: loader panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return m.load(ctx, keys)
}

// pass reads keys once, serves the hits, loads the misses under leases,
// waits for others' leases; it returns the keys to read again.
func (m *many[V]) pass(ctx context.Context, keys []string) (again []string) {
	c := m.c
	resps := m.gets(ctx, keys)
	var misses, leased, leases, tagged, down, failed []string
	var taggedRaws [][]byte
	var taggedEntries []entry
	for i, r := range resps {
		k := keys[i]
		raw, err := r.AsBytes()
		switch {
		case valkey.IsValkeyNil(err):
			misses = append(misses, k)
		case err != nil && ctx.Err() != nil:
			m.answer(k, *new(V), ctx.Err())
		case err != nil && c.dropOtherType(ctx, k, err):
			again = append(again, k)
		case errors.Is(err, ErrCacheUnavailable):
			down = append(down, k)
		case err != nil:
			failed = append(failed, k)
		default:
			e, err := decodeEntry(raw)
			switch {
			case err != nil:
				c.drop(ctx, k, string(raw), &c.foreign)
				again = append(again, k)
			case e.kind == kindLease:
				leased, leases = append(leased, k), append(leases, string(raw))
			case e.kind == kindTagged: // checked in its tags, all at once below
				tagged, taggedRaws, taggedEntries = append(tagged, k), append(taggedRaws, raw), append(taggedEntries, e)
			case !m.hit(ctx, k, e, raw, nil):
				again = append(again, k)
			}
		}
	}
	for i, vouched := range c.registered(ctx, tagged, taggedEntries) {
		if !m.hit(ctx, tagged[i], taggedEntries[i], taggedRaws[i], vouched) {
			again = append(again, tagged[i])
		}
	}
	m.direct(ctx, down, true)
	m.direct(ctx, failed, false)
	again = append(again, m.miss(ctx, misses)...)
	return append(again, m.wait(ctx, leased, leases)...)
}

// gets reads keys, a pipeline at a time.
func (m *many[V]) gets(ctx context.Context, keys []string) []valkey.ValkeyResult {
	return m.c.send(ctx, len(keys), func(i int) valkey.Completed { return m.c.client.B().Get().Key(keys[i]).Build() })
}

// hit serves key from e, as Get's hit does; false says to read it again.
func (m *many[V]) hit(ctx context.Context, key string, e entry, raw []byte, vouched error) bool {
	v, err, ok := m.c.hit(ctx, key, e, raw, vouched, m.one)
	if ok {
		m.keepers[key].keep(v, err, len(raw), e.expiry)
		m.answer(key, v, err)
	}
	return ok
}

// loadsAtOnce is how many loader calls one GetMany makes at once.
const loadsAtOnce = 4

// chunks calls fn on keys, MaxBatch at a time, loadsAtOnce at once, on
// goroutines of their own, as Get loads on one (shared, directs): the
// caller waits for them while ctx lasts, then the keys of the loads not
// done fail with its error, and those loads go on alone, filling or
// giving back their leases as Get's do.
func (m *many[V]) chunks(ctx context.Context, keys []string, fn func(keys []string)) {
	if len(keys) == 0 {
		return
	}
	parts := slices.Collect(slices.Chunk(keys, m.c.opts.MaxBatch))
	done := make([]bool, len(parts)) // under m.mu
	all := make(chan struct{})
	go func() {
		defer close(all)
		var wg sync.WaitGroup
		turns := make(chan struct{}, loadsAtOnce)
		for i, part := range parts {
			select {
			case turns <- struct{}{}:
				wg.Go(func() {
					defer func() { <-turns }()
					m.part(part, &done[i], fn)
				})
			case <-ctx.Done(): // no load starts now (batch): fn gives the leases back at once
				m.part(part, &done[i], fn)
			}
		}
		wg.Wait()
	}()
	select {
	case <-all:
		return
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left == nil {
		m.left = map[string]struct{}{}
	}
	for i, part := range parts {
		if !done[i] {
			for _, k := range part {
				delete(m.found, k)
				m.failed[k], m.left[k] = ctx.Err(), struct{}{}
			}
		}
	}
}

// part runs fn on keys, then notes it done. A panic in fn — the loader's,
// the Codec's, TagsOf's — fails its keys.
func (m *many[V]) part(keys []string, done *bool, fn func(keys []string)) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("writethrough: panicked: %v\n%s", p, debug.Stack())
			for _, k := range keys {
				m.answer(k, *new(V), err)
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		*done = true
	}()
	fn(keys)
}

// direct loads keys without filling, within MaxConcurrentLoads; while the
// cache is down (down), what the local tier kept for StaleIfError is
// served instead, and what is loaded is kept there, as Get's outage does.
func (m *many[V]) direct(ctx context.Context, keys []string, down bool) {
	if down {
		keys = slices.DeleteFunc(keys, func(k string) bool {
			v, err, ok := m.c.stale(k)
			if ok {
				m.answer(k, v, err)
			}
			return ok
		})
	}
	m.chunks(ctx, keys, func(keys []string) {
		var vs map[string]V
		err := m.c.directs.enter(ctx)
		if err == nil {
			vs, err = m.batch(ctx, keys)
			m.c.directs.leave()
		}
		for _, k := range keys {
			v, ok := vs[k]
			switch {
			case err != nil && !errors.Is(err, ErrNotFound):
				m.answer(k, v, err)
				continue
			case ok:
				m.answer(k, v, nil)
			}
			if down {
				var absent error
				if !ok {
					absent = ErrNotFound
				}
				m.keepers[k].keep(v, absent, fromSource, m.c.opts.Clock.Now().Add(m.c.opts.TTL))
			}
		}
	})
}

// uniq is keys without repeats, in their order.
func uniq(keys []string) []string {
	seen := make(map[string]struct{}, len(keys))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}
