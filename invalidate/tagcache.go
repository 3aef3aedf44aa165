package invalidate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/tagset"
)

// pageScript marks the tag KEYS[1] invalidated at the tag clock's reading
// ARGV[1], unless it is missing — a fill that finds it missing is not
// stored either —, and returns its fields from the cursor ARGV[2], about
// ARGV[3] of them, with the cursor of the rest.
var pageScript = tagset.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {'0', {}} end
local epoch = tonumber(redis.call('HGET', KEYS[1], '\0e'))
if not epoch or epoch < tonumber(ARGV[1]) then redis.call('HSET', KEYS[1], '\0e', ARGV[1]) end
return redis.call('HSCAN', KEYS[1], ARGV[2], 'COUNT', ARGV[3])`)

// forgetScript removes from the tag KEYS[1] each field ARGV[i] that still
// holds the registration ARGV[i+1]: one a fill made since is kept.
var forgetScript = tagset.NewScript(`
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then n = n + redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return n`)

// forgetChunk is how many members one forgetScript call forgets: two
// arguments each, well within a request's 3,999. A script holds its node
// while it runs, the services' reads waiting: a small one waits them less
// (bench/README.md, tag_100k_read_p99_vs_idle).
const forgetChunk = 100

// Tick is Cache's.
func (c valkeyCache) Tick(ctx context.Context, clock string) (int64, error) {
	return tagset.Tick.Each(ctx, c.client, []string{clock}, tagset.NoArgs)[0].AsInt64()
}

// Page is Cache's.
func (c valkeyCache) Page(ctx context.Context, key string, reading int64, cursor uint64, count int) ([]Member, uint64, error) {
	res := pageScript.Each(ctx, c.client, []string{key}, func(int) []string {
		return []string{strconv.FormatInt(reading, 10), strconv.FormatUint(cursor, 10), strconv.Itoa(count)}
	})[0]
	return members(res)
}

// members reads an HSCAN reply: the tag's members, without its own fields,
// and the cursor of the rest.
func members(res valkey.ValkeyResult) ([]Member, uint64, error) {
	reply, err := res.ToArray()
	if err != nil {
		return nil, 0, err
	}
	if len(reply) != 2 {
		return nil, 0, fmt.Errorf("%w: a page of a tag of %d parts", errInternal, len(reply))
	}
	text, err := reply[0].ToString()
	if err != nil {
		return nil, 0, err
	}
	next, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: a tag's cursor %q", errInternal, text)
	}
	fields, err := reply[1].AsStrSlice()
	if err != nil {
		return nil, 0, err
	}
	out := make([]Member, 0, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		if !tagset.Own(fields[i]) {
			out = append(out, Member{Key: fields[i], Registration: fields[i+1]})
		}
	}
	return out, next, nil
}

// Forget is Cache's: forgetChunk members a call, all at once.
func (c valkeyCache) Forget(ctx context.Context, key string, members []Member) error {
	keys := make([]string, (len(members)+forgetChunk-1)/forgetChunk)
	for i := range keys {
		keys[i] = key
	}
	args := func(i int) []string {
		chunk := members[i*forgetChunk : min((i+1)*forgetChunk, len(members))]
		out := make([]string, 0, 2*len(chunk))
		for _, m := range chunk {
			out = append(out, m.Key, m.Registration)
		}
		return out
	}
	for _, res := range forgetScript.Each(ctx, c.client, keys, args) {
		if err := res.Error(); err != nil {
			return err
		}
	}
	return nil
}
