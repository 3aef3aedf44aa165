package near

import (
	"errors"
	"testing"
	"time"
)

func TestStaleIfErrorKeepsWhatWasHeldUntilTheCacheAnswers(t *testing.T) {
	ch := newChannel(&wire{byPub: map[string][]sent{}}, ChannelOptions{Channel: "stale", Logger: discard, ReadOnly: true})
	kept, plain := New[string](ch, Options{StaleIfError: time.Hour}), New[string](ch, Options{})
	ch.subscribed(0, time.Now(), "node")
	for _, tier := range []*Tier[string]{kept, plain} {
		for _, k := range []string{"a", "b"} {
			tier.Reserve(k)("v-"+k, false, 3, time.Now().Add(time.Hour))
		}
	}
	kept.Reserve("loaded")("v", false, -1, time.Now().Add(time.Hour)) // from the source, the cache down: not for Get
	if _, _, ok := kept.Get("loaded"); ok {
		t.Fatal("a value loaded while the cache did not answer is served as current")
	}
	stale := func(tier *Tier[string], k string) bool { _, _, ok := tier.Stale(k); return ok }
	if stale(kept, "a") {
		t.Fatal("served stale while subscribed")
	}
	ch.lost(0, CauseLost, errors.New("the node is gone"))
	if _, _, ok := kept.Get("a"); ok {
		t.Fatal("served as current once the subscription was lost")
	}
	if v, _, ok := kept.Stale("a"); !ok || v != "v-a" || stale(plain, "a") {
		t.Fatalf("Stale = %q, %v; the tier without StaleIfError: %v", v, ok, stale(plain, "a"))
	}
	if err := kept.Drop(t.Context(), "b"); err != nil || stale(kept, "b") {
		t.Fatalf("a key this process wrote is still served stale (%v)", err)
	}
	keepC := kept.Reserve("c")
	ch.lost(1, CauseLost, errors.New("still gone")) // subscribing again failed: what is kept stays, as old as it was
	if !stale(kept, "a") {
		t.Fatal("what was kept is gone after a second loss")
	}
	if s := kept.Stats(); s.StaleReads != 2 || s.StaleOldest <= 0 {
		t.Fatalf("stats %+v: want 2 stale reads, and their age", s)
	}
	// What the process loads meanwhile is kept too, unless it writes the key.
	keepC("v-c", false, -1, time.Now().Add(time.Hour))
	keepD := kept.Reserve("d")
	if err := kept.Drop(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	keepD("v-d", false, 3, time.Now().Add(time.Hour))
	if !stale(kept, "c") || stale(kept, "d") || plain.Reserve("c") != nil {
		t.Fatalf("loaded while down: c kept %v, d (written meanwhile) kept %v; want c only, and only with StaleIfError", stale(kept, "c"), stale(kept, "d"))
	}
	keepE := kept.Reserve("e")
	kept.Answered()
	keepE("v-e", false, 3, time.Now().Add(time.Hour))
	if stale(kept, "a") || stale(kept, "e") || kept.Reserve("a") != nil {
		t.Fatal("served stale after the cache answered")
	}
}

func TestStaleIfErrorIsBoundedAndEndsWithTheSubscription(t *testing.T) {
	ch := newChannel(&wire{byPub: map[string][]sent{}}, ChannelOptions{Channel: "stale", Logger: discard, ReadOnly: true})
	tier := New[string](ch, Options{StaleIfError: 100 * time.Millisecond})
	fill := func(session uint64) {
		ch.subscribed(session, time.Now(), "node")
		tier.Reserve("a")("v", false, 1, time.Now().Add(time.Hour))
		ch.lost(session, CauseSilent, errors.New("silent"))
	}
	fill(0)
	if _, _, ok := tier.Stale("a"); !ok {
		t.Fatal("not kept on a silent subscription")
	}
	time.Sleep(150 * time.Millisecond)
	if _, _, ok := tier.Stale("a"); ok {
		t.Fatal("served past StaleIfError since the subscription was last heard")
	}
	fill(1)
	ch.subscribed(2, time.Now(), "node")
	if _, _, ok := tier.Stale("a"); ok {
		t.Fatal("served stale once subscribed again")
	}
	tier.Reserve("a")("v", false, 1, time.Now().Add(time.Hour))
	ch.lost(2, CauseGap, errors.New("a gap"))
	if _, _, ok := tier.Stale("a"); ok {
		t.Fatal("kept on a gap, with the cache answering")
	}
}

func TestStaleIfErrorNeverOutlivesTheEntry(t *testing.T) {
	ch := newChannel(&wire{byPub: map[string][]sent{}}, ChannelOptions{Channel: "stale", Logger: discard, ReadOnly: true})
	tier := New[string](ch, Options{StaleIfError: time.Hour, MaxLifetime: 50 * time.Millisecond})
	ch.subscribed(0, time.Now(), "node")
	tier.Reserve("a")("v", false, 1, time.Now().Add(time.Hour))
	ch.lost(0, CauseLost, errors.New("gone"))
	tier.Reserve("b")("v", false, 1, time.Now().Add(time.Hour)) // loaded while down
	time.Sleep(100 * time.Millisecond)
	for _, k := range []string{"a", "b"} {
		if v, _, ok := tier.Stale(k); ok {
			t.Fatalf("Stale served %s = %q past its MaxLifetime", k, v)
		}
	}
}
