package cachetest_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestFakeCache: the fake refuses what the worker's user may not delete
// (WORKER_KEYS: cache:*), and the keys of a node Down stops.
func TestFakeCache(t *testing.T) {
	cachetest.Contract(t, func(t *testing.T) cachetest.UnderTest {
		var mu sync.Mutex
		down := map[string]bool{}
		cache := &cachetest.Cache{Fail: func(key string, _ int) error {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case down[key]:
				return cachetest.ErrRefused
			case !strings.HasPrefix(key, "cache:"):
				return cachetest.ErrNoPerm
			}
			return nil
		}}
		return cachetest.UnderTest{
			Cache: cache,
			Set:   func(_ *testing.T, keys ...string) { cache.Set(keys...) },
			// No slots: a key the cluster would redirect is a key like any other.
			Reshard: func(_ *testing.T, key string, _ bool) { cache.Set(key) },
			Down: func(_ *testing.T, key string) invalidate.Cache {
				mu.Lock()
				defer mu.Unlock()
				down[key] = true
				return cache
			},
			Tag: func(_ *testing.T, key string, keys ...string) { cache.Tag(key, keys...) },
		}
	})
}

// TestValkeyCache runs on a private cluster, which it reshards and stops
// nodes of, logged in as the worker's user.
func TestValkeyCache(t *testing.T) {
	cluster := testenv.StartCluster(t, "contract-cluster", 7471)
	admin := testenv.Connect(t, cluster.Config)
	worker := cluster.Config
	worker.Username, worker.Password = testenv.Getenv(t, "WORKER_USERNAME"), testenv.Getenv(t, "WORKER_PASSWORD")
	cachetest.Contract(t, func(t *testing.T) cachetest.UnderTest {
		cache := invalidate.Valkey(testenv.Connect(t, worker))
		return cachetest.UnderTest{
			Cache:   cache,
			Set:     cachetest.Set(admin),
			Reshard: func(t *testing.T, key string, ask bool) { reshard(t, admin, key, ask) },
			Down: func(t *testing.T, key string) invalidate.Cache {
				addr, _ := owner(t, admin, key)
				port, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
				cluster.StopNode(t, port)
				t.Cleanup(func() { cluster.Restart(t) })
				return cache
			},
			Tag: cachetest.Tag(admin),
		}
	})
}

// owner is the node that serves key: the others answer MOVED.
func owner(t *testing.T, admin valkey.Client, key string) (string, valkey.Client) {
	t.Helper()
	for addr, node := range admin.Nodes() {
		if node.Do(t.Context(), node.B().Exists().Key(key).Build()).Error() == nil {
			return addr, node
		}
	}
	t.Fatalf("no node serves %s", key)
	return "", nil
}

// reshard moves the slot of key from its owner to another node, halfway
// when ask, and stores key there, the way a resharding moves keys.
func reshard(t *testing.T, admin valkey.Client, key string, ask bool) {
	t.Helper()
	ctx := t.Context()
	slot, err := admin.Do(ctx, admin.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	srcAddr, src := owner(t, admin, key)
	var dst valkey.Client
	var srcID, dstID, dstAddr string
	for addr, node := range admin.Nodes() {
		id, err := node.Do(ctx, node.B().ClusterMyid().Build()).ToString()
		switch {
		case err != nil:
			t.Fatal(err)
		case addr == srcAddr:
			srcID = id
		default:
			dst, dstID, dstAddr = node, id, addr
		}
	}
	setSlot := func(ctx context.Context, node valkey.Client, args ...string) {
		t.Helper()
		args = append([]string{strconv.FormatInt(slot, 10)}, args...)
		if err := node.Do(ctx, node.B().Arbitrary("CLUSTER", "SETSLOT").Args(args...).Build()).Error(); err != nil {
			t.Fatalf("CLUSTER SETSLOT %v: %v", args, err)
		}
	}
	setSlot(ctx, dst, "IMPORTING", srcID)
	setSlot(ctx, src, "MIGRATING", dstID)
	if ask {
		t.Cleanup(func() { setSlot(context.Background(), src, "STABLE"); setSlot(context.Background(), dst, "STABLE") })
		err = dst.Dedicated(func(c valkey.DedicatedClient) error {
			return c.DoMulti(ctx, c.B().Asking().Build(), c.B().Set().Key(key).Value("cached").ExSeconds(60).Build())[1].Error()
		})
	} else {
		setSlot(ctx, dst, "NODE", dstID) // the new owner first, as redis-cli --cluster reshard does
		for addr, node := range admin.Nodes() {
			if addr != dstAddr {
				setSlot(ctx, node, "NODE", dstID)
			}
		}
		err = dst.Do(ctx, dst.B().Set().Key(key).Value("cached").ExSeconds(60).Build()).Error()
	}
	if err != nil {
		t.Fatalf("SET %s on its new node: %v", key, err)
	}
	verr, _ := valkey.IsValkeyErr(src.Do(ctx, src.B().Exists().Key(key).Build()).Error())
	if _, moved := verr.IsMoved(); verr == nil || (ask && !strings.HasPrefix(verr.Error(), "ASK")) || (!ask && !moved) {
		t.Fatalf("the old owner of %s answers %v, want a redirect", key, verr)
	}
}

// TestFakeBudget: the fleet's budget in memory keeps the contract the
// worker's, in the cache, keeps (worker's TestConnectionBudgetContract).
func TestFakeBudget(t *testing.T) {
	cachetest.BudgetContract(t, func(*testing.T) invalidate.Budget { return &cachetest.Budget{PerSecond: 1000} }, 1000)
}
