// Package tagset is what the fills that write tags (writethrough) and the
// invalidations that read them (invalidate, inspect) share: the tag clock,
// a way to run scripts on many keys at once, and the layout of a tag in
// the cache — one hash per tag, at the tag prefix followed by
// the tag, whose fields are the keys of the entries that depend on the
// tag, each holding its registration ("<clock>:<prune after, Unix ms>"),
// beside two fields of the tag's own, which begin with a NUL byte so that
// no key is mistaken for them: Epoch, the tag clock's reading at the tag's
// last invalidation, and Cursor, where pruning goes on. The tag clock is
// the key of the prefix itself, which no tag names.
package tagset

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// DefaultPrefix is where tags live unless told otherwise.
const DefaultPrefix = "cache:tag:"

// The fields of a tag's own; the scripts write them as '\0e' and '\0c'.
const (
	Epoch  = "\x00e"
	Cursor = "\x00c"
)

// Key is the key of tag under prefix.
func Key(prefix, tag string) string { return prefix + tag }

// Clock is the key of the tag clock under prefix.
func Clock(prefix string) string { return prefix }

// Own tells a tag's own fields from its members.
func Own(field string) bool { return strings.HasPrefix(field, "\x00") }

// Registration is what a member's field holds: the tag clock's reading
// before its fill loaded, which no other fill has, and when it may be
// pruned.
func Registration(clock int64, pruneAfter time.Time) string {
	return strconv.FormatInt(clock, 10) + ":" + strconv.FormatInt(pruneAfter.UnixMilli(), 10)
}

// ClockOf is the clock reading of a registration.
func ClockOf(registration string) (int64, bool) {
	c, _, ok := strings.Cut(registration, ":")
	n, err := strconv.ParseInt(c, 10, 64)
	return n, ok && err == nil
}

// TickScript reads the tag clock anew, at KEYS[1]: one more than its last
// reading, or the clock node's time in microseconds when that is later, so
// that a clock lost with its node (restarted empty, or failed over to a
// replica behind) goes on past the readings it gave, instead of from 1.
// INCR and INCRBY, not SET: the invalidator's cache user needs no command
// that can overwrite a cached value.
const TickScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('INCR', KEYS[1])
if v < now then v = redis.call('INCRBY', KEYS[1], string.format('%.0f', now - v)) end
return v`

// Tick is TickScript, to run.
var Tick = NewScript(TickScript)

// Script is a Lua script on one key, run on many keys at once.
type Script struct{ src, sha string }

// NewScript returns the script of src.
func NewScript(src string) Script {
	sum := sha1.Sum([]byte(src))
	return Script{src, hex.EncodeToString(sum[:])}
}

// Client is what running scripts needs of a valkey-go client.
type Client interface {
	B() valkey.Builder
	DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult
}

// Each runs s on every one of keys, the i-th with args(i), all at once,
// each sent to its key's node: EVALSHA, then EVAL on the nodes that do not
// have the script yet.
func (s Script) Each(ctx context.Context, c Client, keys []string, args func(i int) []string) []valkey.ValkeyResult {
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.B().Evalsha().Sha1(s.sha).Numkeys(1).Key(k).Arg(args(i)...).Build()
	}
	resps := c.DoMulti(ctx, cmds...)
	var again []int
	for i, r := range resps {
		if err, ok := valkey.IsValkeyErr(r.Error()); ok && err.IsNoScript() {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return resps
	}
	cmds = cmds[:0]
	for _, i := range again {
		cmds = append(cmds, c.B().Eval().Script(s.src).Numkeys(1).Key(keys[i]).Arg(args(i)...).Build())
	}
	for j, r := range c.DoMulti(ctx, cmds...) {
		resps[again[j]] = r
	}
	return resps
}

// NoArgs is the arguments of a script that takes none.
func NoArgs(int) []string { return nil }
