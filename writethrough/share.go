package writethrough

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// outcome is what one shared load gives the callers that share it.
type outcome[V any] struct {
	v      V
	err    error
	filled bool   // the value reached the cache
	retry  bool   // the lease was someone else's: read the key again
	leader string // the caller whose call ran the load
}

// errWaitedOut tells a caller that joined another's load to load itself:
// half its time is gone, and the load it joined is not done.
var errWaitedOut = errors.New("writethrough: the shared load outlasted half the caller's time")

// shared runs fn once among this process's concurrent callers with the same
// key in group. fn runs under a context that no single caller's
// cancellation ends, since its result serves them all. A caller that
// joined another's load waits for it half the time its context has left at
// most, then gets errWaitedOut, so that it can still load within its
// deadline; the caller whose call runs fn waits as long as its context
// allows. led reports whether this caller's call ran fn.
func shared[V any](ctx context.Context, group *singleflight.Group, key string, fn func(context.Context) outcome[V]) (o outcome[V], led bool, err error) {
	me := stamp()
	var mine atomic.Bool
	ch := group.DoChan(key, func() (result any, err error) {
		mine.Store(true)
		// A panicking loader fails its callers; it must not crash the process,
		// and its stack is all that says where it panicked.
		defer func() {
			if p := recover(); p != nil {
				result = outcome[V]{err: fmt.Errorf("writethrough: loader panicked: %v\n%s", p, debug.Stack()), leader: me}
			}
		}()
		o := fn(context.WithoutCancel(ctx))
		o.leader = me
		return o, nil
	})
	var patience <-chan time.Time
	if d, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(d) / 2)
		defer t.Stop()
		patience = t.C
	}
	for {
		select {
		case r := <-ch:
			o = r.Val.(outcome[V])
			return o, o.leader == me, nil
		case <-ctx.Done():
			return o, false, ctx.Err()
		case <-patience:
			if !mine.Load() {
				return o, false, errWaitedOut
			}
			patience = nil
		}
	}
}
