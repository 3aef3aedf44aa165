package invalidate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

func setKeys(ctx context.Context, t *testing.T, c valkey.Client, keys []string) {
	t.Helper()
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.B().Set().Key(k).Value("v").Ex(time.Minute).Build()
	}
	for i, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatalf("SET %s: %v", keys[i], err)
		}
	}
}

func existing(ctx context.Context, t *testing.T, c valkey.Client, keys []string) []string {
	t.Helper()
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.B().Exists().Key(k).Build()
	}
	var left []string
	for i, r := range c.DoMulti(ctx, cmds...) {
		if n, err := r.AsInt64(); err != nil {
			t.Fatalf("EXISTS %s: %v", keys[i], err)
		} else if n > 0 {
			left = append(left, keys[i])
		}
	}
	return left
}

func TestInvalidateAcrossSlotsWithDedup(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := testenv.Cache(t)
	ns := rand.Text()
	rules := mustRules(t, `entities: {item: ["t:`+ns+`:{id}", "t:`+ns+`:list"]}`)
	inv := New(Valkey(c), Options{Rules: rules, Chunk: 64})

	// 300 records over many slots; every record also invalidates the shared
	// list key, and ids 0-99 appear twice.
	var records []Record
	var keys []string
	for i := range 300 {
		id := strconv.Itoa(i % 200)
		records = append(records, Record{ID: "m" + strconv.Itoa(i), Changes: []events.Change{{Entity: "item", ID: id, OccurredAt: time.Now().Add(-time.Second)}}})
		if i < 200 {
			keys = append(keys, "t:"+ns+":"+id)
		}
	}
	setKeys(ctx, t, c, keys[:150]) // 150 exist, 50 are already absent, and the list key too
	rep := inv.Invalidate(ctx, Decoded(records))

	if ids := failedIDs(rep); len(ids) != 0 {
		t.Fatalf("failed records %v: %v", ids, rep.Results[0].Err)
	}
	m := rep.Metrics
	if m.Records != 300 || m.KeysDeleted != 150 || m.KeysAbsent != 51 || m.KeysFailed != 0 || m.Failed != 0 {
		t.Fatalf("metrics = %+v, want 300 records, 150 deleted, 51 absent (distinct keys)", m)
	}
	if m.MaxLag < time.Second {
		t.Fatalf("max lag = %v, want at least the 1 s the changes are old", m.MaxLag)
	}
	first := rep.Results[0]
	if first.Record != "m0" || len(first.Keys) != 2 || first.Keys[0] != (KeyResult{"t:" + ns + ":0", KeyDeleted}) {
		t.Fatalf("first result = %+v", first)
	}
	if r := rep.Results[199]; r.Keys[0].Status != KeyAbsent {
		t.Fatalf("result of an absent key = %+v", r)
	}
	if left := existing(ctx, t, c, keys); len(left) != 0 {
		t.Fatalf("keys still there: %q", left)
	}
}

func TestInvalidateBeyondTheArgumentLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := testenv.Cache(t)
	keys := make([]string, 5000) // one record, more keys than a request may carry arguments
	for i := range keys {
		keys[i] = "cache:big:" + strconv.Itoa(i)
	}
	setKeys(ctx, t, c, keys)
	rep := New(Valkey(c), Options{}).Invalidate(ctx, Decoded([]Record{{ID: "big", Changes: []events.Change{{Keys: keys}}}}))
	if err := rep.Results[0].Err; err != nil {
		t.Fatal(err)
	}
	if rep.Metrics.KeysDeleted != 5000 {
		t.Fatalf("deleted %d keys, want 5000", rep.Metrics.KeysDeleted)
	}
}

func TestInvalidateFailsOnlyBadRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := testenv.Cache(t)
	decodeErr := errMalformed
	rep := New(Valkey(c), Options{}).Invalidate(ctx, Decoded([]Record{
		{ID: "ok", Changes: []events.Change{{Entity: "user", ID: "1"}}},
		{ID: "bad-json", Err: decodeErr},
		{ID: "no-id", Changes: []events.Change{{Entity: "user", ID: "2"}, {Entity: "user"}}},
	}))
	if got := fmt.Sprint(failedIDs(rep)); got != "[bad-json no-id]" {
		t.Fatalf("failed = %s, want [bad-json no-id]", got)
	}
	if !errors.Is(rep.Results[1].Err, errMalformed) || !errors.Is(rep.Results[2].Err, errPlan) {
		t.Fatalf("errors = %v / %v", rep.Results[1].Err, rep.Results[2].Err)
	}
	// The planned key of the failing record is deleted all the same.
	if keys := rep.Results[2].Keys; len(keys) != 1 || keys[0].Key != "cache:user:2" || keys[0].Status == KeyFailed {
		t.Fatalf("keys of the failing record = %+v", keys)
	}
}

// owners maps each key to the address of the node that serves it.
// markedFailed returns a new client once its topology no longer has the
// node at addr: the cluster marked it failed.
func markedFailed(t *testing.T, cfg elasticache.Config, addr string) valkey.Client {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		c, err := elasticache.New(cfg)
		if err != nil {
			continue
		}
		if _, known := c.Nodes()[addr]; !known {
			return c
		}
		c.Close()
	}
	t.Fatalf("the cluster did not mark %s failed in 30 s", addr)
	return nil
}

func owners(ctx context.Context, t *testing.T, c valkey.Client, keys []string) map[string]string {
	t.Helper()
	owner := map[string]string{}
	for addr, node := range c.Nodes() {
		for _, k := range keys {
			if err := node.Do(ctx, node.B().Exists().Key(k).Build()).Error(); err == nil {
				owner[k] = addr
			}
		}
	}
	return owner
}

func TestInvalidateWithANodeDown(t *testing.T) {
	cluster := testenv.StartCluster(t, "node-down", 7201)
	c, err := elasticache.New(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()

	var records []Record
	var keys []string
	for i := range 60 {
		id := strconv.Itoa(i)
		keys = append(keys, "cache:user:"+id)
		records = append(records, Record{ID: id, Changes: []events.Change{{Entity: "user", ID: id}}})
	}
	setKeys(ctx, t, c, keys)
	owner := owners(ctx, t, c, keys)
	down := cluster.Ports[1]
	downAddr := "127.0.0.1:" + strconv.Itoa(down)
	cluster.StopNode(t, down)

	inv := New(Valkey(c), Options{Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	deadlineCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	start := time.Now()
	rep := inv.Invalidate(deadlineCtx, Decoded(records))
	elapsed := time.Since(start)
	cancel()
	t.Logf("with a node down: %v, %+v", elapsed, rep.Metrics)
	if elapsed > 2*time.Second+500*time.Millisecond {
		t.Errorf("Invalidate took %v with a 2 s deadline", elapsed)
	}
	for i, res := range rep.Results {
		onDownNode := owner[keys[i]] == downAddr
		if onDownNode != (res.Err != nil) || onDownNode != res.Transient {
			t.Fatalf("record %s (key on %s, down %s): err = %v, transient %v", res.Record, owner[keys[i]], downAddr, res.Err, res.Transient)
		}
		if onDownNode && res.Keys[0].Status != KeyFailed {
			t.Fatalf("record %s: key status %v on a stopped node", res.Record, res.Keys[0].Status)
		}
	}
	if rep.Metrics.Failed == 0 || rep.Metrics.Failed == len(records) {
		t.Fatalf("%d of %d records failed: want those on the stopped node only", rep.Metrics.Failed, len(records))
	}

	// Once the cluster marks the node failed, valkey-go's topology has no
	// node for its slots, and it refuses a whole DoMulti that names one of
	// them: still only that node's keys may fail.
	fresh := markedFailed(t, cluster.Config, downAddr)
	defer fresh.Close()
	failedCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	rep = New(Valkey(fresh), Options{Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}).Invalidate(failedCtx, Decoded(records))
	cancel()
	for i, res := range rep.Results {
		if onDownNode := owner[keys[i]] == downAddr; onDownNode != (res.Err != nil) {
			t.Fatalf("node marked failed: record %s (key on %s, down %s): err = %v", res.Record, owner[keys[i]], downAddr, res.Err)
		}
	}

	restart := time.Now()
	cluster.Restart(t)
	t.Logf("restart: %v", time.Since(restart))
	var retry []Record
	for _, id := range failedIDs(rep) {
		n, _ := strconv.Atoi(id)
		retry = append(retry, records[n])
	}
	// The restarted node lost its data (no persistence): set its keys again
	// so the retry has something to delete.
	var again []string
	for _, r := range retry {
		again = append(again, "cache:user:"+r.ID)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for setErr := errors.New("start"); setErr != nil; {
		setErr = nil
		cmds := make(valkey.Commands, len(again))
		for i, k := range again {
			cmds[i] = c.B().Set().Key(k).Value("v").Build()
		}
		for _, r := range c.DoMulti(waitCtx, cmds...) {
			if r.Error() != nil {
				setErr = r.Error()
			}
		}
		if setErr != nil && waitCtx.Err() != nil {
			t.Fatalf("node did not come back: %v", setErr)
		}
		if setErr != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("writable again after %v", time.Since(restart))
	rep = inv.Invalidate(waitCtx, Decoded(retry))
	if failed := failedIDs(rep); len(failed) != 0 || rep.Metrics.KeysDeleted != len(retry) {
		t.Fatalf("after recovery: failed %v, metrics %+v", failed, rep.Metrics)
	}
}

// TestInvalidateInputs decodes a batch of many chunks on the way: results
// stay in input order, keys shared across chunks are sent once, and an
// input whose decoder panics fails alone.
func TestInvalidateInputs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := testenv.Cache(t)
	ns := rand.Text()
	inputs := make([]int, 1000)
	for i := range inputs {
		inputs[i] = i
	}
	var keys []string
	for i := range 500 {
		keys = append(keys, "cache:item:"+ns+strconv.Itoa(i))
	}
	setKeys(ctx, t, c, keys)
	rep := New(Valkey(c), Options{}).Invalidate(ctx, Inputs(inputs, func(i *int) Record {
		if *i%97 == 0 {
			panic("decoder bug")
		}
		// Inputs i and i+500 change the same item, in chunks far apart.
		return Record{ID: strconv.Itoa(*i), Changes: []events.Change{{Entity: "item", ID: ns + strconv.Itoa(*i%500)}}}
	}))
	for i, res := range rep.Results {
		switch {
		case i%97 == 0:
			if !errors.Is(res.Err, errInternal) || !strings.Contains(res.Err.Error(), "internal error decoding a record: decoder bug") {
				t.Fatalf("input %d: err = %v, want the decoder's panic", i, res.Err)
			}
		case res.Err != nil || res.Record != strconv.Itoa(i) || len(res.Keys) != 1 || res.Keys[0].Key != keys[i%500]:
			t.Fatalf("result %d = %+v", i, res)
		}
	}
	// No item has both its inputs panic, so every key goes, once.
	if m := rep.Metrics; m.KeysDeleted != 500 || m.KeysAbsent != 0 || m.Failed != 11 {
		t.Fatalf("metrics = %+v, want 500 distinct keys deleted once, 11 records failed", m)
	}
	if left := existing(ctx, t, c, keys); len(left) != 0 {
		t.Fatalf("keys left: %q", left)
	}
}

// errMalformed is a record's decoding error: it fails the record for good.
var errMalformed = errors.New("malformed JSON")

// failedIDs are the IDs of rep's records that failed, in input order.
func failedIDs(rep Report) []string {
	var ids []string
	for _, res := range rep.Results {
		if res.Err != nil {
			ids = append(ids, res.Record)
		}
	}
	return ids
}
