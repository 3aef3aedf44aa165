package cachetest

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/invalidator-go/invalidator/invalidate"
)

// Sparse is an invalidate.Cache in memory that holds only the keys put in
// it: every other key is absent, as in an empty cache, and not kept, so a
// test may send it hundreds of megabytes of keys and count what the code
// under test retains. Its tags are sorted once, not at each page, which
// for a tag of 100,000 entries costs more than the worker. A key given a
// reply fails with it, whatever is asked of it. Sparse is safe for
// concurrent use.
type Sparse struct {
	mu             sync.Mutex
	put, gone      map[string]bool
	watch, touched map[string]bool
	replies        map[string]error
	tags           map[string]*sparseTag
	clock          int64
}

// sparseTag is a tag's entries, in key order, and the registration of each
// still registered.
type sparseTag struct {
	keys []string
	reg  map[string]string
}

// NewSparse returns an empty cache that notes which of watch any call
// names (Touched).
func NewSparse(watch ...string) *Sparse {
	c := &Sparse{put: map[string]bool{}, gone: map[string]bool{}, watch: map[string]bool{}, touched: map[string]bool{},
		replies: map[string]error{}, tags: map[string]*sparseTag{}}
	for _, k := range watch {
		c.watch[k] = true
	}
	return c
}

// Put stores keys.
func (c *Sparse) Put(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.put[k], c.gone[k] = true, false
	}
}

// Reply makes every call naming key fail with the error reply msg.
func (c *Sparse) Reply(key, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replies[key] = Reply(msg)
}

// Tag registers entries in the tag at key.
func (c *Sparse) Tag(key string, entries ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tag := &sparseTag{keys: slices.Sorted(slices.Values(entries)), reg: map[string]string{}}
	for _, k := range entries {
		c.clock++
		tag.reg[k] = strconv.FormatInt(c.clock, 10)
	}
	c.tags[key] = tag
}

// Present returns those of keys that were put and are not deleted.
func (c *Sparse) Present(keys []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, k := range keys {
		if c.put[k] && !c.gone[k] {
			out = append(out, k)
		}
	}
	return out
}

// Touched returns the watched keys that an Unlink named.
func (c *Sparse) Touched() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.touched))
}

// Unlink is invalidate.Cache's.
func (c *Sparse) Unlink(ctx context.Context, keys []string, status []invalidate.KeyStatus) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i, k := range keys {
		if c.watch[k] {
			c.touched[k] = true
		}
		err := ctx.Err()
		if err == nil {
			err = c.replies[k]
		}
		switch {
		case err != nil:
			if errs == nil {
				errs = make([]error, len(keys))
			}
			status[i], errs[i] = invalidate.KeyFailed, err
		case c.put[k] && !c.gone[k]:
			status[i], c.gone[k] = invalidate.KeyDeleted, true
		default:
			status[i] = invalidate.KeyAbsent
		}
	}
	return errs
}

// Tick is invalidate.Cache's.
func (c *Sparse) Tick(ctx context.Context, clock string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.replies[clock]; err != nil {
		return 0, err
	}
	c.clock++
	return c.clock, ctx.Err()
}

// Page is invalidate.Cache's: the cursor is where the page starts.
func (c *Sparse) Page(ctx context.Context, key string, _ int64, cursor uint64, count int) ([]invalidate.Member, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.replies[key]; err != nil {
		return nil, 0, err
	}
	tag := c.tags[key]
	if tag == nil || cursor >= uint64(len(tag.keys)) {
		return nil, 0, ctx.Err()
	}
	end := min(int(cursor)+max(count, 1), len(tag.keys))
	var page []invalidate.Member
	for _, k := range tag.keys[cursor:end] {
		if reg, ok := tag.reg[k]; ok {
			page = append(page, invalidate.Member{Key: k, Registration: reg})
		}
	}
	next := uint64(end)
	if end == len(tag.keys) {
		next = 0
	}
	return page, next, ctx.Err()
}

// Forget is invalidate.Cache's.
func (c *Sparse) Forget(ctx context.Context, key string, members []invalidate.Member) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tag := c.tags[key]; tag != nil {
		for _, m := range members {
			if tag.reg[m.Key] == m.Registration {
				delete(tag.reg, m.Key)
			}
		}
	}
	return ctx.Err()
}
