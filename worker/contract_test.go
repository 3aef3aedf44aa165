package worker

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestConnectionContract runs the cache contract against the worker's own
// connection, logged in as the worker's user, on the stack's cluster: its
// slots stay put and its nodes up, for the tests that share it. Resharding
// and stopping a node are the Valkey adapter's run, on a private cluster,
// through the same client; the connection's own refusal is to connect.
func TestConnectionContract(t *testing.T) {
	cfg := testenv.WorkerCacheConfig(t)
	admin := testenv.Cache(t)
	cachetest.Contract(t, func(t *testing.T) cachetest.UnderTest {
		return cachetest.UnderTest{
			Cache: connectAs(t, cfg),
			Set:   cachetest.Set(admin),
			Tag:   cachetest.Tag(admin),
			Down: func(t *testing.T, _ string) invalidate.Cache {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				closed := cfg
				closed.Endpoint = l.Addr().String()
				l.Close()
				return connectAs(t, closed)
			},
		}
	})
}

// connectAs is the connection Start makes, closed when the test ends.
func connectAs(t *testing.T, cfg elasticache.Config) *connection {
	t.Helper()
	opt, err := cfg.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	tune(&opt)
	c := newConnection(cfg, opt, slog.New(slog.DiscardHandler), newSigns())
	t.Cleanup(c.close)
	return c
}

// TestConnectionBudgetContract runs the fleet's budget contract against
// the budget the worker's connection keeps in the cache, as the worker's
// user: each run on a budget of its own (its key is its rate's).
func TestConnectionBudgetContract(t *testing.T) {
	cfg := testenv.WorkerCacheConfig(t)
	const perSecond = 1000
	n := 0
	cachetest.BudgetContract(t, func(t *testing.T) invalidate.Budget {
		n++
		return connectAs(t, cfg).budget(perSecond + float64(time.Now().UnixNano()%1_000_000)/1e9 + float64(n)/1e3)
	}, perSecond)
}
