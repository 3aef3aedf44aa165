package writethrough

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// ErrOverloaded is returned by a read that would load directly — the cache
// down, or not usable for the key — while MaxConcurrentLoads loads already
// run, once its context ends; it wraps the context's error.
var ErrOverloaded = errors.New("writethrough: MaxConcurrentLoads loads already run")

// directs are the loads that do not fill: at most MaxConcurrentLoads at
// once (slots), and those of a key shared among the callers that asked
// before the load began. One that arrives while a load runs waits for it
// to end and shares the next: a read that begins after an invalidation
// finished must not get what a load read before it.
type directs[V any] struct {
	slots   chan struct{} // nil: no bound
	mu      sync.Mutex
	running map[string]*direct[V]
	next    map[string]*direct[V] // to start when the running one ends
}

// direct is one load, and its callers.
type direct[V any] struct {
	ctx     context.Context // ended when no caller waits any more
	cancel  context.CancelFunc
	done    chan struct{}
	v       V
	err     error
	waiters int  // under directs.mu
	queued  bool // under directs.mu: waiting for a slot
}

func newDirects[V any](bound int) *directs[V] {
	d := &directs[V]{running: map[string]*direct[V]{}, next: map[string]*direct[V]{}}
	if bound > 0 {
		d.slots = make(chan struct{}, bound)
	}
	return d
}

// load returns what load gives for key, from a call that began after this
// one did.
func (d *directs[V]) load(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	d.mu.Lock()
	l := d.next[key]
	switch prev := d.running[key]; {
	case l != nil:
	case prev != nil:
		l = d.start(key, load, prev)
		d.next[key] = l
	default:
		l = d.start(key, load, nil)
		d.running[key] = l
	}
	l.waiters++
	d.mu.Unlock()
	select {
	case <-l.done:
		return l.v, l.err
	case <-ctx.Done():
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.waiters--; l.waiters == 0 {
		l.cancel()
	}
	var zero V
	if l.queued {
		return zero, fmt.Errorf("%w: %w", ErrOverloaded, ctx.Err())
	}
	return zero, ctx.Err()
}

// start makes the load of key, which runs once prev (if any) ends, within
// a slot; d.mu is held.
func (d *directs[V]) start(key string, load func(context.Context) (V, error), prev *direct[V]) *direct[V] {
	ctx, cancel := context.WithCancel(context.Background())
	l := &direct[V]{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer cancel()
		if prev != nil {
			<-prev.done
		}
		d.mu.Lock()
		if d.next[key] == l {
			delete(d.next, key)
		}
		d.running[key], l.queued = l, d.slots != nil
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			if d.running[key] == l {
				delete(d.running, key)
			}
			d.mu.Unlock()
		}()
		if l.err = d.enter(ctx); l.err != nil {
			return
		}
		d.mu.Lock()
		l.queued = false
		d.mu.Unlock()
		defer d.leave()
		// A panicking loader fails its callers; it must not crash the process.
		defer func() {
			if p := recover(); p != nil {
				l.err = fmt.Errorf("writethrough: loader panicked: %v\n%s", p, debug.Stack())
			}
		}()
		l.v, l.err = load(ctx)
	}()
	return l
}

// enter takes a slot, waiting while ctx allows.
func (d *directs[V]) enter(ctx context.Context) error {
	if d.slots == nil {
		return nil
	}
	select {
	case d.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrOverloaded, ctx.Err())
	}
}

func (d *directs[V]) leave() {
	if d.slots != nil {
		<-d.slots
	}
}
