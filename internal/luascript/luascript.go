package luascript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// Doer is what running a script needs of a client; valkey.Client has it.
type Doer interface {
	B() valkey.Builder
	Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult
}

// Script is a Lua script, safe for concurrent use.
type Script struct {
	src string
	sha string
}

// New returns a Script for src.
func New(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(sum[:])}
}

// Run runs the script with keys and args.
func (s *Script) Run(ctx context.Context, c Doer, keys, args []string) valkey.ValkeyResult {
	res := c.Do(ctx, c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if err, ok := valkey.IsValkeyErr(res.Error()); ok && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		res = c.Do(ctx, c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	return res
}
