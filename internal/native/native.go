package native

import (
	"context"
	"errors"
	"sync"

	"github.com/valkey-io/valkey-go"
)

// known holds, per client, whether its cache has DELIFEQ: asked once.
var known sync.Map // valkey.Client → bool

// Has reports whether client's cache has Valkey 9's conditional commands:
// DELIFEQ (9.0), and with it SET … IFEQ (8.1). It asks once per client
// (COMMAND INFO DELIFEQ, a nil entry where the command is unknown); a cache
// that does not answer is asked again at the next call, and one that
// refuses the question (NOPERM) is taken to have none: the scripts then run.
func Has(ctx context.Context, client valkey.Client) bool {
	if has, ok := known.Load(client); ok {
		return has.(bool)
	}
	reply, err := client.Do(ctx, client.B().CommandInfo().CommandName("DELIFEQ").Build()).ToArray()
	if err != nil {
		if Refused(err) {
			known.Store(client, false)
		}
		return false
	}
	has := len(reply) == 1 && !reply[0].IsNil()
	known.Store(client, has)
	return has
}

// Refused reports whether err is the cache's own error reply (not a nil,
// not a connection's failure): the reply a node without the command gives,
// where the caller runs the script instead, which does the same.
func Refused(err error) bool {
	var reply *valkey.ValkeyError
	return errors.As(err, &reply) && !valkey.IsValkeyNil(err)
}
