package writethrough

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// fakeLocal is a local tier that holds what it is given, and tells what
// was dropped.
type fakeLocal struct {
	mu      sync.Mutex
	held    map[string]product
	absent  map[string]bool // held as "not found"
	expiry  map[string]time.Time
	dropped []string
	off     bool  // keeps nothing, as while unsubscribed
	dropErr error // what Drop returns
	// What it kept when it stopped vouching (Stale), until Answered.
	stale    map[string]product
	answered int
}

func newFakeLocal() *fakeLocal {
	return &fakeLocal{held: map[string]product{}, absent: map[string]bool{}, expiry: map[string]time.Time{}}
}

func (f *fakeLocal) Get(key string) (product, bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.held[key]
	return v, f.absent[key], ok || f.absent[key]
}

func (f *fakeLocal) Reserve(key string) func(product, bool, int, time.Time) {
	if f.off {
		return nil
	}
	return func(v product, notFound bool, size int, expiry time.Time) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if notFound {
			f.absent[key] = true
		} else {
			f.held[key] = v
		}
		f.expiry[key] = expiry
	}
}

func (f *fakeLocal) Stale(key string) (product, bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.stale[key]
	return v, false, ok
}

func (f *fakeLocal) Answered() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stale = nil
	f.answered++
}

func (f *fakeLocal) Drop(_ context.Context, keys ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.held, k)
		delete(f.absent, k)
	}
	f.dropped = append(f.dropped, keys...)
	return f.dropErr
}

func TestAHitIsKeptAndThenServedFromMemory(t *testing.T) {
	client := &countingClient{Client: testenv.Cache(t)}
	near := newFakeLocal()
	c := New[product](client, Options[product]{Local: near})
	k := key(t)
	load := func(context.Context) (product, error) { return product{ID: "p1", Price: 10}, nil }
	if _, err := c.Get(t.Context(), k, load); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := near.Get(k); ok {
		t.Fatal("a value loaded was kept before it was read back from the shared cache")
	}
	if _, err := c.Get(t.Context(), k, load); err != nil {
		t.Fatal(err)
	}
	if v, _, ok := near.Get(k); !ok || v.Price != 10 || time.Until(near.expiry[k]) < 8*time.Minute {
		t.Fatalf("kept %+v, %v until %v: want the hit, until the shared entry's expiry", v, ok, near.expiry[k])
	}
	calls := client.calls.Load()
	v, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{}, errors.New("no load expected") })
	if err != nil || v.Price != 10 || client.calls.Load() != calls {
		t.Fatalf("Get = %+v, %v after %d calls to the cache: want it from memory", v, err, client.calls.Load()-calls)
	}
}

func TestNotFoundIsKeptAsNotFound(t *testing.T) {
	near := newFakeLocal()
	c := New[product](testenv.Cache(t), Options[product]{Local: near})
	k := key(t)
	for range 2 {
		if _, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{}, ErrNotFound }); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if _, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "x"}, nil }); !errors.Is(err, ErrNotFound) || !near.absent[k] {
		t.Fatalf("err = %v: want the kept not found", err)
	}
}

func TestATierThatKeepsNothingIsOnlyAsked(t *testing.T) {
	near := newFakeLocal()
	near.off = true
	c := New[product](testenv.Cache(t), Options[product]{Local: near})
	k := key(t)
	for range 3 {
		if _, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "p"}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(near.held) != 0 {
		t.Fatalf("kept %v while the tier keeps nothing", near.held)
	}
}

func TestWritesDropLocallyAndAnnounce(t *testing.T) {
	near := newFakeLocal()
	c := New[product](testenv.Cache(t), Options[product]{Local: near, VersionOf: versionOf})
	a, b := key(t), key(t)
	near.held[a], near.held[b] = product{ID: "old"}, product{ID: "old"}
	if err := c.Write(t.Context(), a, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteThrough(t.Context(), b, func(context.Context) (product, int64, error) { return product{ID: "new", Version: 2}, 2, nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(near.dropped, []string{a, b}) || len(near.held) != 0 {
		t.Fatalf("dropped %v, still held %v: want both written keys dropped", near.dropped, near.held)
	}
	near.dropErr = errors.New("announcement not sent")
	if err := c.Invalidate(t.Context(), a); !errors.Is(err, ErrInvalidate) || !errors.Is(err, near.dropErr) {
		t.Fatalf("Invalidate = %v: an announcement not sent is an invalidation not done", err)
	}
}

// TestTaggedValuesSkipTheLocalTier: a tagged value's hit checks its tags in
// the shared cache, which memory cannot; a tag lost there before its
// invalidation is announced to nobody.
func TestTaggedValuesSkipTheLocalTier(t *testing.T) {
	near := newFakeLocal()
	c := New[product](testenv.Cache(t), Options[product]{Local: near, TagPrefix: "cache:tag:" + key(t) + ":",
		TagsOf: func(p product) []string { return []string{"product:" + p.ID} }})
	k := key(t)
	for range 3 {
		if _, err := c.Get(t.Context(), k, func(context.Context) (product, error) { return product{ID: "p"}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(near.held) != 0 {
		t.Fatalf("kept %v: a tagged value in memory", near.held)
	}
}
