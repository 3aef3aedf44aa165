package invalidate

import (
	"context"
	"errors"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// Cache deletes keys: all an Invalidator needs of a cache. Valkey adapts a
// valkey-go client; tests give a fake.
type Cache interface {
	// Unlink deletes keys and writes the outcome of each to status:
	// KeyDeleted, KeyAbsent, or KeyFailed. errs is nil when no key failed,
	// else it holds the reason of each failed key at its index.
	Unlink(ctx context.Context, keys []string, status []KeyStatus) (errs []error)
}

// ValkeyClient is what Valkey needs of a client; valkey.Client has it.
type ValkeyClient interface {
	B() valkey.Builder
	DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult
}

// TaggedCache is a Cache that invalidates tags too.
type TaggedCache interface {
	Cache
	TagCache
}

// Valkey is the cache of a valkey-go client: one UNLINK per key, all in one
// DoMulti, which routes every command to the node owning its key's slot, so
// no request is ever cross-slot or near the 3,999-argument limit; each tag
// in scripts on its own key.
func Valkey(client ValkeyClient) TaggedCache { return valkeyCache{client} }

type valkeyCache struct{ client ValkeyClient }

func (c valkeyCache) Unlink(ctx context.Context, keys []string, status []KeyStatus) (errs []error) {
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.client.B().Unlink().Key(k).Build()
	}
	for i, res := range c.client.DoMulti(ctx, cmds...) {
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

// permanentKeyError reports whether the error of a key or a tag will come
// back however often it is tried: a bug caught, a key or an entry the rules
// do not allow, and every error of the cache's but the closed list of those
// that may pass (internal/cacheerr). Every caller that decides between
// retrying and failing for good asks it.
func permanentKeyError(err error) bool {
	switch {
	case errors.Is(err, ErrInternal), errors.Is(err, ErrPlan):
		return true
	case errors.Is(err, errNotAttempted):
		return false
	}
	return !cacheerr.Transient(err)
}
