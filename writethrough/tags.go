package writethrough

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/tagset"
)

// ErrTag is returned by Get, with the value loaded, when TagsOf gives an
// empty tag: the value is not cached, since no invalidation could name it.
var ErrTag = errors.New("writethrough: TagsOf gave an empty tag")

// tagMargin is how much longer than its entries a tag lives, and how long
// after their expiry their registrations are pruned: room for the clocks
// of the service and of the cache's nodes to disagree. A registration
// pruned early only makes its value miss.
const tagMargin = time.Minute

// registerScript registers the entry ARGV[1] in the tag KEYS[1] with the
// registration ARGV[2], unless the tag was invalidated after the tag clock
// read ARGV[3] — before the fill loaded — or is missing: then nothing
// tells whether it was invalidated meanwhile (never used, expired,
// evicted, lost with its node). It keeps the tag alive at least ARGV[4] ms
// and prunes a few registrations past their time, from where the last
// registration left off. It returns 1 when registered, 0 when the tag was
// invalidated, -1 when it is missing.
var registerScript = tagset.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local epoch = tonumber(redis.call('HGET', KEYS[1], '\0e'))
if epoch and epoch > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local scan = redis.call('HSCAN', KEYS[1], redis.call('HGET', KEYS[1], '\0c') or '0', 'COUNT', 16)
local fields = scan[2]
for i = 1, #fields, 2 do
  local after = string.byte(fields[i], 1) ~= 0 and tonumber(string.match(fields[i + 1], ':(%d+)$'))
  if after and after < now then redis.call('HDEL', KEYS[1], fields[i]) end
end
redis.call('HSET', KEYS[1], '\0c', scan[1])
return 1`)

// createScript makes the tag KEYS[1], found missing, marked invalidated at
// the clock reading ARGV[1], which is after that: the fills that read the
// source before are not stored; those after are. It lives at least ARGV[2]
// ms.
var createScript = tagset.NewScript(`
local epoch = tonumber(redis.call('HGET', KEYS[1], '\0e'))
if not epoch or epoch < tonumber(ARGV[1]) then redis.call('HSET', KEYS[1], '\0e', ARGV[1]) end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1`)

// each runs s on every one of keys, the i-th with args(i), a pipeline at
// a time, as callAll does.
func (c *Cache[V]) each(ctx context.Context, s tagset.Script, keys []string, args func(i int) []string) []valkey.ValkeyResult {
	resps := make([]valkey.ValkeyResult, 0, len(keys))
	for from := 0; from < len(keys); from += pipeline {
		part := keys[from:min(from+pipeline, len(keys))]
		resps = append(resps, c.callAll(ctx, len(part), func(ctx context.Context) []valkey.ValkeyResult {
			return s.Each(ctx, c.client, part, func(i int) []string { return args(from + i) })
		})...)
	}
	return resps
}

// tick reads the tag clock anew.
func (c *Cache[V]) tick(ctx context.Context) (int64, error) {
	return c.each(ctx, tagset.Tick, []string{tagset.Clock(c.opts.TagPrefix)}, tagset.NoArgs)[0].AsInt64()
}

// tag makes e, the value v of key loaded after the tag clock read clock,
// a tagged one if TagsOf gives it tags, and registers it in them. ok says
// whether it may be stored: not when a tag was invalidated since clock or
// was missing, nor when the cache failed.
func (c *Cache[V]) tag(ctx context.Context, key string, e *entry, v V, clock int64, ttl time.Duration) (ok bool, err error) {
	tags := slices.Compact(slices.Sorted(slices.Values(c.opts.TagsOf(v))))
	if len(tags) == 0 {
		return true, nil
	}
	if tags[0] == "" {
		return false, fmt.Errorf("%w: %s", ErrTag, key)
	}
	e.kind, e.tags, e.reg = kindTagged, tags, tagset.Registration(clock, e.expiry.Add(tagMargin))
	life := ms(ttl + tagMargin)
	keys := make([]string, len(tags))
	for i, t := range tags {
		keys[i] = tagset.Key(c.opts.TagPrefix, t)
	}
	var missing []string
	ok = true
	for i, r := range c.each(ctx, registerScript, keys, func(int) []string { return []string{key, e.reg, strconv.FormatInt(clock, 10), life} }) {
		n, err := r.AsInt64()
		if err != nil {
			return false, nil // not stored: the next reader tries again
		}
		if n == -1 {
			missing = append(missing, keys[i])
		}
		ok = ok && n == 1
	}
	if len(missing) > 0 {
		now, err := c.tick(ctx)
		if err != nil {
			return false, nil
		}
		_ = c.each(ctx, createScript, missing, func(int) []string { return []string{strconv.FormatInt(now, 10), life} })
	}
	return ok, nil
}

// errUnregistered says that a tagged entry is no longer registered in one
// of its tags as its fill left it: an invalidation of the tag removed it, or
// the tag was lost, when its value must not be served either.
var errUnregistered = errors.New("writethrough: not registered in its tags")

// registered checks that each tagged entry es[i] of keys[i] is still
// registered in its tags, a pipeline at a time: nil when it is (and for an
// entry without tags), errUnregistered when not, the cache's error when it
// cannot tell.
func (c *Cache[V]) registered(ctx context.Context, keys []string, es []entry) []error {
	var tags, fields []string
	for i, e := range es {
		if e.kind == kindTagged {
			for _, t := range e.tags {
				tags, fields = append(tags, tagset.Key(c.opts.TagPrefix, t)), append(fields, keys[i])
			}
		}
	}
	errs := make([]error, len(es))
	if len(tags) == 0 {
		return errs
	}
	resps := c.send(ctx, len(tags), func(i int) valkey.Completed { return c.client.B().Hget().Key(tags[i]).Field(fields[i]).Build() })
	for i, e := range es {
		if e.kind != kindTagged {
			continue
		}
		for range e.tags {
			reg, err := resps[0].ToString()
			resps = resps[1:]
			switch {
			case errors.Is(errs[i], errUnregistered):
			case valkey.IsValkeyNil(err), err == nil && reg != e.reg:
				errs[i] = errUnregistered
			case err != nil:
				errs[i] = err
			}
		}
	}
	return errs
}
