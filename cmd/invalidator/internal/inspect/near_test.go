package inspect

import (
	"context"
	"testing"
	"time"
)

// tier is a local tier that keeps what it is given.
type tier map[string][]byte

func (t tier) Get(key string) ([]byte, bool, bool) { v, ok := t[key]; return v, false, ok }

func (t tier) Reserve(key string) func([]byte, bool, int, time.Time) {
	return func(v []byte, _ bool, _ int, _ time.Time) { t[key] = v }
}

func (t tier) Stale(string) ([]byte, bool, bool) { return nil, false, false }

func (t tier) Answered() {}

func (t tier) Drop(_ context.Context, keys ...string) error {
	for _, k := range keys {
		delete(t, k)
	}
	return nil
}

func TestNearReadsFromMemoryWhatItKept(t *testing.T) {
	cache := &fakeCache{values: map[string]string{"a": `{"Version":1}`, "lease": "wt1|l|stamp|", "down": "x"}, down: map[string]bool{"down": true}}
	held := tier{}
	n := Near(cache, held)
	first := n.Get(t.Context(), []string{"a", "lease", "absent", "down"})
	if !first[0].Present || !first[1].Present || first[2].Present || first[3].Err == nil {
		t.Fatalf("first reads %+v", first)
	}
	if _, ok := held["lease"]; ok || string(held["a"]) != `{"Version":1}` || len(held) != 1 {
		t.Fatalf("kept %v: want the value, not the loader's lease", held)
	}
	cache.values["a"] = `{"Version":2}` // unannounced: the tier still holds version 1
	if r := n.Get(t.Context(), []string{"a"}); string(r[0].Value) != `{"Version":1}` {
		t.Fatalf("read %s: want the kept value, from memory", r[0].Value)
	}
}
