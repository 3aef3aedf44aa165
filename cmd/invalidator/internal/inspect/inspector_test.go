package inspect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// fakeCache holds JSON values and tags; a key named in down does not
// answer.
type fakeCache struct {
	mu     sync.Mutex
	values map[string]string
	tags   map[string][]invalidate.Member
	down   map[string]bool
}

func (f *fakeCache) Get(_ context.Context, keys []string) []Read {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Read, len(keys))
	for i, k := range keys {
		v, ok := f.values[k]
		switch {
		case f.down[k]:
			out[i].Err = errors.New("down")
		case ok:
			out[i] = Read{Value: []byte(v), Present: true}
		}
	}
	return out
}

// changes is a source that emits its records once, then waits.
type changes [][]events.Change

func (c changes) Read(ctx context.Context, emit func([]events.Change, error), _ func(error)) error {
	for _, r := range c {
		emit(r, nil)
	}
	emit(nil, errors.New("malformed JSON"))
	<-ctx.Done()
	return nil
}

func TestInspectorJudgesEachKeyAtEachDelay(t *testing.T) {
	rules, err := invalidate.RulesFromEnv(func(string) string { return "" }) // cache:{entity}:{id}
	if err != nil {
		t.Fatal(err)
	}
	user := func(id string, v int64) events.Change {
		return events.Change{Entity: "user", ID: id, Version: v, HasVersion: true}
	}
	cache := &fakeCache{values: map[string]string{
		"cache:user:stale":       `{"version":1}`,
		"cache:user:fresh":       `{"version":2}`,
		"cache:user:unversioned": `{"name":"x"}`,
	}, down: map[string]bool{"cache:user:down": true}}
	src := changes{
		{user("stale", 2), user("fresh", 2)},
		{user("gone", 2), user("unversioned", 2), user("down", 2)},
		{{Entity: "user"}}, // no ID: the rules plan nothing
	}
	in := New(cache, rules, Options{Delays: []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}, VersionPath: []string{"version"}})
	read, stop := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer stop()
	rep, err := in.Run(read, t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 4 || rep.Undecodable != 1 || rep.Changes != 6 || rep.Sampled != 6 || rep.Unplanned != 1 {
		t.Fatalf("report %+v", rep)
	}
	for _, d := range rep.Delays {
		want := DelayReport{After: d.After, Keys: 5, Consistent: 2, Inconsistent: 1, Unverified: 1, Unreadable: 1, Absent: 1, findings: 1}
		if d != want {
			t.Errorf("at %v: %+v, want %+v", d.After, d, want)
		}
	}
	if got := fmt.Sprint(rep.Inconsistent); len(rep.Inconsistent) != 2 || rep.Inconsistent[0].Key != "cache:user:stale" || rep.Inconsistent[0].Found != 1 || rep.Inconsistent[0].Want != 2 {
		t.Fatalf("findings %s", got)
	}
}

func TestSampling(t *testing.T) {
	rules, _ := invalidate.RulesFromEnv(func(string) string { return "" })
	var src changes
	for i := range 2000 {
		src = append(src, []events.Change{{Entity: "user", ID: fmt.Sprint(i)}})
	}
	in := New(&fakeCache{}, rules, Options{Sample: 0.1, Delays: []time.Duration{time.Millisecond}})
	read, stop := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer stop()
	rep, _ := in.Run(read, t.Context(), src)
	if rep.Changes != 2000 || rep.Sampled < 100 || rep.Sampled > 300 || rep.Delays[0].Keys != rep.Sampled {
		t.Fatalf("%d of %d sampled, %d keys checked: want about 200, each checked", rep.Sampled, rep.Changes, rep.Delays[0].Keys)
	}
}

// TestADuplicateDeliveryIsCheckedOnce: SNS and SQS deliver at least once;
// a change with a version read twice counts once, and its keys are checked
// once. Changes without a version cannot be told apart and are all checked.
func TestADuplicateDeliveryIsCheckedOnce(t *testing.T) {
	rules, _ := invalidate.RulesFromEnv(func(string) string { return "" })
	v := func(id string, version int64, op events.Op) events.Change {
		return events.Change{Entity: "user", ID: id, Version: version, HasVersion: true, Op: op}
	}
	src := changes{
		{v("a", 2, events.OpUpdate), v("a", 3, events.OpUpdate), v("a", 3, events.OpDelete)},
		{v("a", 2, events.OpUpdate), {Entity: "user", ID: "b"}}, // a redelivery
		{{Entity: "user", ID: "b"}},
	}
	in := New(&fakeCache{}, rules, Options{Delays: []time.Duration{time.Millisecond}})
	read, stop := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer stop()
	rep, _ := in.Run(read, t.Context(), src)
	if rep.Changes != 5 || rep.Duplicates != 1 || rep.Delays[0].Keys != 5 {
		t.Fatalf("%d changes, %d duplicates, %d keys checked: want 5, 1 and 5", rep.Changes, rep.Duplicates, rep.Delays[0].Keys)
	}
}

func TestSeenForgetsPastItsHorizon(t *testing.T) {
	s := seen{horizon: time.Minute}
	now, c := time.Now(), identity{entity: "user", id: "a", version: 1}
	if !s.add(now, c) || s.add(now.Add(time.Second), c) {
		t.Fatal("a change read twice within the horizon counts twice")
	}
	if !s.add(now.Add(2*time.Minute), c) || len(s.order) != 1 {
		t.Fatalf("past the horizon: %d remembered, want the new copy alone", len(s.order))
	}
}

// flood emits one change after the other until ctx ends.
type flood struct{}

func (flood) Read(ctx context.Context, emit func([]events.Change, error), _ func(error)) error {
	for i := 0; ctx.Err() == nil; i++ {
		emit([]events.Change{{Entity: "user", ID: fmt.Sprint(i)}}, nil)
	}
	return nil
}

// TestStoppingTheChecksNeverHangs: with the checks stopped, readers facing
// full queues go on, and the run ends once the reading stops.
func TestStoppingTheChecksNeverHangs(t *testing.T) {
	rules, _ := invalidate.RulesFromEnv(func(string) string { return "" })
	in := New(&fakeCache{}, rules, Options{Delays: []time.Duration{time.Hour}})
	read, stopReading := context.WithCancel(t.Context())
	checks, stopChecks := context.WithCancel(t.Context())
	done := make(chan Report)
	go func() { rep, _ := in.Run(read, checks, flood{}); done <- rep }()
	time.Sleep(200 * time.Millisecond)
	stopChecks()
	time.Sleep(200 * time.Millisecond)
	stopReading()
	select {
	case rep := <-done:
		if rep.Delays[0].Keys != 0 {
			t.Fatalf("%d keys checked an hour early", rep.Delays[0].Keys)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end")
	}
}

// failing cannot read at all.
type failing struct{}

func (failing) Read(context.Context, func([]events.Change, error), func(error)) error {
	return errors.New("AccessDenied")
}

// TestASourceThatCannotReadStopsTheRun: a stream the inspector may not read
// is said at once, not after the queue beside it has been read for an hour.
func TestASourceThatCannotReadStopsTheRun(t *testing.T) {
	rules, _ := invalidate.RulesFromEnv(func(string) string { return "" })
	in := New(&fakeCache{}, rules, Options{})
	read, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	start := time.Now()
	_, err := in.Run(read, t.Context(), flood{}, failing{})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %v, want AccessDenied at once", time.Since(start), err)
	}
}

func (f *fakeCache) Tag(_ context.Context, key string, limit int) (invalidate.Tag, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[key] {
		return invalidate.Tag{}, errors.New("down")
	}
	t := invalidate.Tag{Members: f.tags[key]}
	if len(t.Members) > limit {
		t.Members, t.More = t.Members[:limit], true
	}
	return t, nil
}

// taggedEntry is a writethrough value of tags whose fill read the tag clock
// at clock.
func taggedEntry(clock int64) string {
	return fmt.Sprintf("wt1|t|0123456789abcdef|0|1000|1893456000000|%d:1893456060000|1|9:product:1|{}", clock)
}

// TestInspectorJudgesTaggedEntries: the entries a tag of a change holds are
// checked: one a reader would serve, filled before the change, is
// inconsistent; filled after, absent, or another fill's, consistent.
func TestInspectorJudgesTaggedEntries(t *testing.T) {
	rules, err := invalidate.ParseRules([]byte(`tags: {entities: {product: ["product:{id}"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	change := time.Now()
	before, after := change.Add(-time.Second).UnixMicro(), change.Add(time.Second).UnixMicro()
	reg := func(clock int64) string { return fmt.Sprintf("%d:1893456060000", clock) }
	cache := &fakeCache{values: map[string]string{
		"cache:list:stale":   taggedEntry(before),
		"cache:list:fresh":   taggedEntry(after),
		"cache:list:another": taggedEntry(after), // refilled, its registration there not yet
	}, tags: map[string][]invalidate.Member{"cache:tag:product:1": {
		{Key: "cache:list:stale", Registration: reg(before)}, {Key: "cache:list:fresh", Registration: reg(after)},
		{Key: "cache:list:another", Registration: reg(before)}, {Key: "cache:list:gone", Registration: reg(before)},
	}}}
	in := New(cache, rules, Options{Delays: []time.Duration{10 * time.Millisecond}})
	read, stop := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer stop()
	rep, err := in.Run(read, t.Context(), changes{{{Entity: "product", ID: "1", OccurredAt: change}}})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Delays[0]
	if d.Keys != 5 || d.Tags != 1 || d.Inconsistent != 1 || d.Consistent != 4 || d.Absent != 2 ||
		len(rep.Inconsistent) != 1 || rep.Inconsistent[0].Key != "cache:list:stale" || rep.Inconsistent[0].Tag != "cache:tag:product:1" {
		t.Fatalf("delay %+v, findings %+v; %+v", d, rep.Inconsistent, rep)
	}
}

// TestATaggedEntryWithoutTheChangesTimeIsUnverified: with no occurredAt,
// nothing tells whether a fill came before the change.
func TestATaggedEntryWithoutTheChangesTimeIsUnverified(t *testing.T) {
	before := time.Now().Add(-time.Second).UnixMicro()
	if v := judgeTagged([]byte(taggedEntry(before)), true, fmt.Sprintf("%d:1893456060000", before), time.Time{}); v != Unverified {
		t.Fatalf("verdict %v, want unverified", v)
	}
}
