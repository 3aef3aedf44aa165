package invalidate

import (
	"context"
	"errors"
	"sync"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// Cache is all an Invalidator needs of a cache: to delete keys, and to
// invalidate tags. Valkey adapts a valkey-go client; tests give a fake.
//
// An invalidation reads the tag clock once for its batch, and for each tag
// marks it invalidated at that reading — a fill that read the source
// before is then not stored, and one that reads it after is —, reads its
// members a page at a time, deletes them as keys, and removes their
// registrations, so that a fill's registration made since stays.
type Cache interface {
	// Unlink deletes keys and writes the outcome of each to status:
	// KeyDeleted, KeyAbsent, or KeyFailed. errs is nil when no key failed,
	// else it holds the reason of each failed key at its index.
	Unlink(ctx context.Context, keys []string, status []KeyStatus) (errs []error)
	// Tick reads the tag clock at key anew.
	Tick(ctx context.Context, clock string) (int64, error)
	// Page marks the tag at key invalidated at reading, unless it is
	// missing, and returns about count of its members from cursor on, and
	// the cursor of the rest: 0 when there are none.
	Page(ctx context.Context, key string, reading int64, cursor uint64, count int) (members []Member, next uint64, err error)
	// Forget removes the members' registrations from the tag at key, but
	// those made again since they were read.
	Forget(ctx context.Context, key string, members []Member) error
}

// ValkeyClient is what Valkey needs of a client; valkey.Client has it.
type ValkeyClient interface {
	B() valkey.Builder
	DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult
}

// Valkey is the cache of a valkey-go client: one UNLINK per key, all in one
// DoMulti, which routes every command to the node owning its key's slot, so
// no request is ever cross-slot or near the 3,999-argument limit; each tag
// in scripts on its own key.
func Valkey(client ValkeyClient) Cache { return valkeyCache{client} }

type valkeyCache struct{ client ValkeyClient }

func (c valkeyCache) Unlink(ctx context.Context, keys []string, status []KeyStatus) (errs []error) {
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.client.B().Unlink().Key(k).Build()
	}
	results := c.client.DoMulti(ctx, cmds...)
	if noSlot(results) {
		c.alone(ctx, keys, results)
	}
	for i, res := range results {
		n, err := res.AsInt64()
		switch {
		case err == nil && n > 0:
			status[i] = KeyDeleted
		case err == nil:
			status[i] = KeyAbsent
		default:
			status[i] = KeyFailed
			if errs == nil {
				errs = make([]error, len(keys))
			}
			errs[i] = err
		}
	}
	return errs
}

// noSlot tells whether valkey-go refused a DoMulti for a slot without a
// node: it refuses every command of it then, when one key's slot is on a
// node the cluster marked failed.
func noSlot(results []valkey.ValkeyResult) bool {
	return len(results) > 0 && errors.Is(results[0].Error(), valkey.ErrNoSlot)
}

// aloneAtOnce bounds the commands sent one by one at once; valkey-go
// pipelines them on each node's connection. Each that finds its slot
// without a node makes valkey-go refresh its topology, once for all those
// in flight together: a batch's keys go in as few waves as it can.
const aloneAtOnce = 1024

// alone unlinks each key of a refused DoMulti by itself, so that only the
// keys of the slots without a node fail: a node that is down holds back
// its own keys, not the batch's.
func (c valkeyCache) alone(ctx context.Context, keys []string, results []valkey.ValkeyResult) {
	slots := make(chan struct{}, aloneAtOnce)
	var wg sync.WaitGroup
	for i, k := range keys {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			results[i] = c.client.DoMulti(ctx, c.client.B().Unlink().Key(k).Build())[0]
		})
	}
	wg.Wait()
}

// permanentKeyError reports whether the error of a key or a tag will come
// back however often it is tried: a bug caught, a key or an entry the rules
// do not allow, and every error of the cache's but the closed list of those
// that may pass (internal/cacheerr). Every caller that decides between
// retrying and failing for good asks it.
func permanentKeyError(err error) bool {
	switch {
	case errors.Is(err, errInternal), errors.Is(err, errPlan):
		return true
	case errors.Is(err, errNotAttempted):
		return false
	}
	return !cacheerr.Transient(err)
}
