package endpoint_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/endpoint"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// through is an endpoint in front of the stack's first node and a client
// of that node alone through it, set up by with; both end with the test.
func through(t *testing.T, with func(*valkey.ClientOption)) (*endpoint.Endpoint, valkey.Client) {
	cfg := testenv.CacheConfig(t)
	testenv.Cache(t)
	e, err := endpoint.Listen("127.0.0.1:0", cfg.Endpoint, filepath.Dir(cfg.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	opt, err := cfg.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	opt.InitAddress, opt.ForceSingleClient = []string{e.Addr()}, true
	with(&opt)
	client, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return e, client
}

// TestRepointMovesConnectionsUnseen: a client's connection through the
// endpoint, paused and moved to another node connection, goes on as it
// was: no new connection, its login and name kept.
func TestRepointMovesConnectionsUnseen(t *testing.T) {
	var dials atomic.Int32
	e, client := through(t, func(opt *valkey.ClientOption) {
		opt.ClientName = "repointed"
		opt.DialCtxFn = func(ctx context.Context, dst string, dialer *net.Dialer, c *tls.Config) (net.Conn, error) {
			dials.Add(1)
			return (&tls.Dialer{NetDialer: dialer, Config: c}).DialContext(ctx, "tcp", dst)
		}
	})
	echo := rand.Text()
	if err := client.Do(t.Context(), client.B().Echo().Message(echo).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := dials.Load()
	e.Pause()
	e.Repoint(testenv.CacheConfig(t).Endpoint)
	v, err := client.Do(t.Context(), client.B().Echo().Message(echo).Build()).ToString()
	name, nerr := client.Do(t.Context(), client.B().ClientGetname().Build()).ToString()
	if err != nil || v != echo || nerr != nil || name != "repointed" || dials.Load() != before {
		t.Fatalf("after the move: %q %v, name %q %v, %d dials (%d before): want the answer, the name kept, no new connection", v, err, name, nerr, dials.Load(), before)
	}
}

// TestMeteredCountsWhatTheCacheWould: a small command is one ECPU, a
// value of 8 KB eight more, each way; a PING is none.
func TestMeteredCountsWhatTheCacheWould(t *testing.T) {
	e, client := through(t, func(*valkey.ClientOption) {})
	measure := func(cmd valkey.Completed) float64 {
		before := e.Metered()
		if err := client.Do(t.Context(), cmd).Error(); err != nil && !valkey.IsValkeyNil(err) {
			t.Fatal(err)
		}
		return e.Metered() - before
	}
	key := "cache:endpoint:{b}:" + rand.Text() // slot 3300: on the first master, behind the endpoint
	if got := measure(client.B().Ping().Build()); got != 0 {
		t.Errorf("PING metered %g ECPUs, want 0", got)
	}
	if got := measure(client.B().Get().Key(key).Build()); got < 1 || got > 1.1 {
		t.Errorf("GET of nothing metered %g ECPUs, want 1", got)
	}
	value := string(make([]byte, 8192))
	if got := measure(client.B().Set().Key(key).Value(value).Px(time.Minute).Build()); got < 8 || got > 9.1 {
		t.Errorf("SET of 8 KB metered %g ECPUs, want 8 to 9", got)
	}
	if got := measure(client.B().Get().Key(key).Build()); got < 8 || got > 9.1 {
		t.Errorf("GET of 8 KB metered %g ECPUs, want 8 to 9", got)
	}
}
