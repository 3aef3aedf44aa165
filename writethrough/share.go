package writethrough

import (
	"context"
	"fmt"
	"runtime/debug"

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

// shared runs fn once among this process's concurrent callers with the same
// key in group. fn runs under a context that no single caller's
// cancellation ends, since its result serves them all; each caller waits
// only as long as its own context allows. led reports whether this caller's
// call ran fn.
func shared[V any](ctx context.Context, group *singleflight.Group, key string, fn func(context.Context) outcome[V]) (o outcome[V], led bool, err error) {
	me := stamp()
	ch := group.DoChan(key, func() (result any, err error) {
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
	select {
	case r := <-ch:
		o = r.Val.(outcome[V])
		return o, o.leader == me, nil
	case <-ctx.Done():
		return o, false, ctx.Err()
	}
}
