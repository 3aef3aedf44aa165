package inspect

import (
	"context"
	"time"

	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/writethrough"
)

// Near reads keys through a local tier in front of cache, as a service
// with writethrough/near does: what the tier holds comes from memory, the
// rest from cache, and is kept — but for a loader's lease, which a service
// never keeps. The checks then tell what the announcements left stale in a
// process's memory, beside the shared cache.
func Near(cache Cache, tier writethrough.Local[[]byte]) Cache { return near{cache, tier} }

type near struct {
	cache Cache
	tier  writethrough.Local[[]byte]
}

func (n near) Get(ctx context.Context, keys []string) []Read {
	out := make([]Read, len(keys))
	var missed []string
	var at []int
	var keep []func([]byte, bool, int, time.Time)
	for i, k := range keys {
		if v, _, ok := n.tier.Get(k); ok {
			out[i] = Read{Value: v, Present: true}
			continue
		}
		missed, at, keep = append(missed, k), append(at, i), append(keep, n.tier.Reserve(k))
	}
	if len(missed) == 0 {
		return out
	}
	for j, r := range n.cache.Get(ctx, missed) {
		out[at[j]] = r
		if s, ok := writethrough.Describe(r.Value); r.Present && keep[j] != nil && !(ok && s.Lease) {
			keep[j](r.Value, false, len(r.Value), time.Now().Add(time.Hour)) // the tier's lifetime bounds it
		}
	}
	return out
}

// Tag reads tags from the shared cache: the local tier holds values, not
// the tags' registrations.
func (n near) Tag(ctx context.Context, key string, limit int) (invalidate.Tag, error) {
	return n.cache.Tag(ctx, key, limit)
}

// NearReport is what the local tier of an inspection did.
type NearReport struct {
	Hits     int64            `json:"hits"`     // keys read from memory
	Kept     int64            `json:"kept"`     // reads from the cache kept
	Dropped  int64            `json:"dropped"`  // keys dropped by announcements
	Messages int64            `json:"messages"` // announcements heard, heartbeats included
	Flushes  map[string]int64 `json:"flushes"`  // by cause
}
