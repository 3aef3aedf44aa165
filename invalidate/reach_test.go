package invalidate_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
)

// numbered are n keys, prefix0 to prefix(n-1).
func numbered(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint(prefix, i)
	}
	return keys
}

// countSent is a fake cache that counts the keys sent to it, by prefix.
func countSent(sent map[string]*atomic.Int64) *cachetest.Cache {
	return &cachetest.Cache{Forgetful: true, Unlinked: func(_ context.Context, keys []string) {
		for _, k := range keys {
			for prefix, n := range sent {
				if strings.HasPrefix(k, prefix) {
					n.Add(1)
				}
			}
		}
	}}
}

func TestARecordPastAWholeAttemptFailsForGoodUnsent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sent := map[string]*atomic.Int64{"cache:big:": {}, "cache:small:": {}}
		opts := fast()
		opts.ECPUPerSecond = 1000 // 2,000 ECPUs in the attempt's 2 s
		inv := invalidate.New(countSent(sent), opts)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		batch := invalidate.Decoded([]invalidate.Record{
			keysRecord("big", false, numbered("cache:big:", 2500)...),
			keysRecord("small", false, numbered("cache:small:", 10)...),
		})
		batch.Attempt = 2 * time.Second
		start := time.Now()
		rep := inv.Invalidate(ctx, batch)
		big, small := rep.Results[0], rep.Results[1]
		if big.Err == nil || big.Transient || !strings.Contains(big.Err.Error(), "cost at least 2500 ECPUs, more than the 2000") {
			t.Fatalf("the record of 2,500 keys: %v (transient %v), want it failed for good with its cost and the budget", big.Err, big.Transient)
		}
		if small.Err != nil {
			t.Fatalf("the record of 10 keys beside it: %v", small.Err)
		}
		if n := sent["cache:big:"].Load(); n != 0 {
			t.Fatalf("%d keys of the record past its attempt sent, want none: it is parked whole, its budget left to the others", n)
		}
		if n := sent["cache:small:"].Load(); n != 10 {
			t.Fatalf("%d keys of the small record sent, want 10", n)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("took %v by the fake clock: a record past its attempt fails before it waits on the budget", took)
		}
	})
}

func TestRecordsPastWhatTheBatchCanSpendWaitUnsent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sent := map[string]*atomic.Int64{"cache:a:": {}, "cache:b:": {}, "cache:c:": {}}
		opts := fast()
		opts.ECPUPerSecond = 1000
		inv := invalidate.New(countSent(sent), opts)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second) // 1,000 ECPUs
		defer cancel()
		batch := invalidate.Decoded([]invalidate.Record{
			keysRecord("a", false, numbered("cache:a:", 600)...),
			keysRecord("b", false, numbered("cache:b:", 600)...),
			keysRecord("c", false, numbered("cache:c:", 300)...),
		})
		batch.Attempt = time.Second
		rep := inv.Invalidate(ctx, batch)
		if err := rep.Results[0].Err; err != nil {
			t.Fatalf("the first record: %v", err)
		}
		// b does not fit what a left; c, after it, does.
		if b := rep.Results[1]; b.Err == nil || !b.Transient || !strings.Contains(b.Err.Error(), "not attempted") {
			t.Fatalf("the second record: %v (transient %v), want it failed for now, not attempted", b.Err, b.Transient)
		}
		if err := rep.Results[2].Err; err != nil {
			t.Fatalf("the third record, which fits what the first left: %v", err)
		}
		if a, b, c := sent["cache:a:"].Load(), sent["cache:b:"].Load(), sent["cache:c:"].Load(); a != 600 || b != 0 || c != 300 {
			t.Fatalf("sent %d, %d, %d keys of the three records, want 600, 0, 300", a, b, c)
		}
	})
}

func TestWithoutAnAttemptARecordPastReachOnlyWaits(t *testing.T) {
	opts := fast()
	opts.ECPUPerSecond = 1000
	inv := invalidate.New(&cachetest.Cache{Forgetful: true}, opts)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	// The failover window's rounds give no Attempt: what they cannot send
	// now is shown again, never dropped for good.
	rep := inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{keysRecord("big", false, numbered("cache:big:", 5000)...)}))
	if res := rep.Results[0]; res.Err == nil || !res.Transient {
		t.Fatalf("%v (transient %v), want it failed for now", res.Err, res.Transient)
	}
}

func TestARecordPlansAtMost50000KeysAcrossItsTemplates(t *testing.T) {
	templates := make([]string, 5000)
	for i := range templates {
		templates[i] = fmt.Sprintf(`"cache:t%d:{item.s}"`, i)
	}
	rules, err := invalidate.ParseRules([]byte("tables: {T: [" + strings.Join(templates, ",") + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	image := events.Image{"s": {Type: events.TypeStringSet, SS: numbered("m", 1000)}}
	change := events.Change{Source: events.SourceDynamoDB, Table: "T", ID: "1", Op: "MODIFY", OldImage: image, NewImage: image}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	// Two changes of the record: the second has no room left at all.
	keys, err := rules.Keys(&change, nil)
	keys, err2 := rules.Keys(&change, keys)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err == nil || err2 == nil || !strings.Contains(err.Error(), "the record plans more than 50000 keys") {
		t.Fatalf("errors %v and %v, want the record past its 50,000 keys", err, err2)
	}
	if len(keys) != 50_000 {
		t.Fatalf("%d keys planned, want the first 50,000 (5,000,000 without the cap)", len(keys))
	}
	if mib := (after.TotalAlloc - before.TotalAlloc) >> 20; mib > 64 || took > 5*time.Second {
		t.Fatalf("%d MiB allocated in %v: the cap is checked as templates expand", mib, took)
	}
	tags, err := rules.Tags(&events.Change{Entity: "p", Tags: numbered("t", 50_001)}, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 50000 tags") || len(tags) != 50_000 {
		t.Fatalf("%d tags, %v: want 50,000 and the record past its tags", len(tags), err)
	}
}

// TestARecordPastItsCapIsSentNone: a record over 50,000 keys fails for good
// with none of its keys sent — their deletes alone would take a small
// function's CPU for seconds —; the record beside it is done.
func TestARecordPastItsCapIsSentNone(t *testing.T) {
	templates := make([]string, 100)
	for i := range templates {
		templates[i] = fmt.Sprintf(`"cache:t%d:{item.s}"`, i)
	}
	opts := fast()
	rules, err := invalidate.ParseRules([]byte("tables: {T: [" + strings.Join(templates, ",") + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Rules = rules
	sent := map[string]*atomic.Int64{"cache:t": {}, "cache:small:": {}}
	inv := invalidate.New(countSent(sent), opts)
	image := events.Image{"s": {Type: events.TypeStringSet, SS: numbered("m", 1000)}}
	big := invalidate.Record{ID: "big", Changes: []events.Change{{Source: events.SourceDynamoDB, Table: "T", ID: "1", Op: "MODIFY", OldImage: image, NewImage: image}}}
	rep := inv.Invalidate(t.Context(), invalidate.Decoded([]invalidate.Record{big, keysRecord("small", false, "cache:small:1")}))
	if err := rep.Results[0].Err; err == nil || rep.Results[0].Transient || !strings.Contains(err.Error(), "more than 50000 keys") {
		t.Fatalf("the record of 100,000 keys: %v, want it failed for good past its cap", err)
	}
	if n := sent["cache:t"].Load(); n != 0 {
		t.Fatalf("%d of its keys sent, want none", n)
	}
	if rep.Results[1].Err != nil || sent["cache:small:"].Load() != 1 {
		t.Fatalf("the record beside it: %v, %d sent", rep.Results[1].Err, sent["cache:small:"].Load())
	}
}
