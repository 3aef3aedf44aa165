package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/fleetbudget"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// TestAShortCallDoesNotCutADeleteShort: the worker's calls share one
// connection a node, and some are bounded tighter than a delete's attempt
// (the probe's and the heartbeat's second). valkey-go sets a lone call's
// deadline on a connection that has only had one call at a time, and a
// stalled node then fails the calls queued behind it at that deadline: a
// delete sent while the heartbeat waited failed after 1 s, not its
// AttemptTimeout, and its record was retried (a poller draining on
// SIGTERM handed it back).
func TestAShortCallDoesNotCutADeleteShort(t *testing.T) {
	cluster := testenv.StartCluster(t, "short-calls", 7241)
	admin := testenv.Connect(t, cluster.Config)
	opt, err := cluster.Config.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	tune(&opt)
	client, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const key = "cache:{short-calls}"
	// With a deadline, as the worker's every call: one without (t.Context)
	// would put the connection in valkey-go's pipelining mode for good.
	set, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := client.Do(set, client.B().Set().Key(key).Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var stalled sync.WaitGroup
	defer stalled.Wait()
	for addr, node := range admin.Nodes() {
		stalled.Go(func() {
			if err := node.Do(t.Context(), node.B().Arbitrary("DEBUG", "SLEEP", "2").Build()).Error(); err != nil {
				t.Errorf("DEBUG SLEEP on %s: %v", addr, err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	var short sync.WaitGroup
	defer short.Wait()
	short.Go(func() {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_ = client.Do(ctx, client.B().Exists().Key(key).Build()).Error() // fails: its node sleeps
	})
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	began := time.Now()
	if errs := invalidate.Valkey(client).Unlink(ctx, []string{key}, make([]invalidate.KeyStatus, 1)); errs != nil && errs[0] != nil {
		t.Errorf("the delete failed after %v, while its node slept 2 s and its attempt had 5: %v", time.Since(began).Round(time.Millisecond), errs[0])
	}
}

// TestABudgetOnAFrozenNodeIsTakenFromItsOtherKey: the fleet's budget is
// kept at two keys on two shards; while the first's node does not answer
// (failing over), a take is granted from the second within its time, and
// the process keeps its pace, not only its fallback share.
func TestABudgetOnAFrozenNodeIsTakenFromItsOtherKey(t *testing.T) {
	cluster := testenv.StartClusterWithReplica(t, "budget-keys", 7291)
	const perSecond = 25000 // its first key, slot 16284, is on the last shard, the one with the replica
	w, err := Start("poller", Config{Cache: cluster.Config, Rules: invalidate.DefaultRules()}, &queuestest.SQS{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := w.conn.budget(perSecond)
	if got, _, _, err := b.Take(t.Context(), 10, false, 0); err != nil || got != 10 {
		t.Fatalf("granted %g (%v), want 10", got, err)
	}
	cluster.Freeze(t, cluster.Master)
	defer cluster.Thaw(t, cluster.Master) // before the worker closes: no close left waiting on it
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	began := time.Now()
	if got, _, _, err := b.Take(ctx, 10, false, 0); err != nil || got != 10 {
		t.Fatalf("with the first key's node frozen: granted %g after %v (%v), want 10 from the second key", got, time.Since(began).Round(time.Millisecond), err)
	}
	keys := fleetbudget.Keys(perSecond)
	for _, port := range cluster.Ports[:2] {
		node := cluster.Node(t, port)
		n, err := node.Do(t.Context(), node.B().Exists().Key(keys[1]).Build()).AsInt64()
		node.Close()
		if err == nil && n == 1 {
			return
		}
	}
	t.Fatalf("the second key %s is on no shard the frozen one is not", keys[1])
}
