package inspect

import (
	"context"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/invalidate"
)

// Cache is what the inspector needs of the cache: reading keys, and tags.
type Cache interface {
	// Get reads keys and returns what each holds, in order.
	Get(ctx context.Context, keys []string) []Read
	// Tag reads the tag at key and up to limit of the entries it holds.
	Tag(ctx context.Context, key string, limit int) (invalidate.Tag, error)
}

// Read is what one key held.
type Read struct {
	Value   []byte
	Present bool
	Err     error // the cache did not answer
}

// Valkey reads keys with GET through a valkey-go client, which sends each
// to its slot's node, and tags with HGET and HSCAN: the inspector's cache
// user needs only those (and +asking to follow a slot in migration).
func Valkey(c valkey.Client) Cache { return valkeyCache{c} }

type valkeyCache struct{ c valkey.Client }

func (v valkeyCache) Get(ctx context.Context, keys []string) []Read {
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = v.c.B().Get().Key(k).Build()
	}
	out := make([]Read, len(keys))
	for i, r := range v.c.DoMulti(ctx, cmds...) {
		b, err := r.AsBytes()
		switch {
		case err == nil:
			out[i] = Read{Value: b, Present: true}
		case valkey.IsValkeyNil(err):
		default:
			out[i] = Read{Err: err}
		}
	}
	return out
}

func (v valkeyCache) Tag(ctx context.Context, key string, limit int) (invalidate.Tag, error) {
	return invalidate.ReadTag(ctx, v.c, key, limit)
}
