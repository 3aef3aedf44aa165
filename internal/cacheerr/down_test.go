package cacheerr_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestWhatCountsAsDown classifies real replies of the cluster and the
// errors of a cache that does not answer.
func TestWhatCountsAsDown(t *testing.T) {
	for err, want := range map[error]bool{
		valkey.Nil: false, nil: false,
		context.DeadlineExceeded: true, valkey.ErrClosing: true, io.EOF: true,
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}: true,
		errors.New("a failure nobody listed"):                                       true,
	} {
		if cacheerr.Down(err) != want {
			t.Errorf("%v: down %v, want %v", err, !want, want)
		}
	}
	client := testenv.Cache(t)
	for msg, want := range map[string]bool{
		"CLUSTERDOWN the cluster is down": true, "TRYAGAIN multiple keys": true, "LOADING dataset in memory": true,
		"NOPERM no permissions": false, "ERR syntax error": false, "WRONGTYPE wrong kind": false,
		"OOM command not allowed": false, "BUSY a script runs": false,
	} {
		err := client.Do(t.Context(), client.B().Eval().Script("return redis.error_reply(ARGV[1])").Numkeys(0).Arg(msg).Build()).Error()
		if cacheerr.Down(err) != want {
			t.Errorf("reply %q (%v): down %v, want %v", msg, err, !want, want)
		}
	}
}
