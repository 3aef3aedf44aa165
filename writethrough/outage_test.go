package writethrough

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestADirectLoadIsNeverOlderThanTheRead: a read that begins after an
// invalidation finished does not share a direct load that began before it.
func TestADirectLoadIsNeverOlderThanTheRead(t *testing.T) {
	client := testenv.Cache(t)
	c, other, third := New[product](client, Options[product]{}), New[product](client, Options[product]{}), New[product](client, Options[product]{})
	k := key(t)
	var db atomic.Value
	db.Store("v1")
	block := func(started, release chan struct{}) func(context.Context) (product, error) {
		return func(context.Context) (product, error) {
			v := db.Load().(string)
			close(started)
			<-release
			return product{ID: v}, nil
		}
	}
	release := make(chan struct{})
	defer close(release)
	s0 := make(chan struct{})
	go other.Get(context.Background(), k, block(s0, release)) // another process's lease
	<-s0
	sA, releaseA := make(chan struct{}), make(chan struct{})
	ctxA, cancelA := context.WithTimeout(context.Background(), time.Second)
	defer cancelA()
	go c.Get(ctxA, k, block(sA, releaseA)) // waits half its time, then loads directly: v1
	<-sA
	db.Store("v2") // the write, and its invalidation, finished
	if err := client.Do(t.Context(), client.B().Unlink().Key(k).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s1 := make(chan struct{})
	go third.Get(context.Background(), k, block(s1, release)) // a lease again
	<-s1
	ctxB, cancelB := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancelB()
	go func() { time.Sleep(1200 * time.Millisecond); close(releaseA) }()
	v, err := c.Get(ctxB, k, func(context.Context) (product, error) { return product{ID: db.Load().(string)}, nil })
	if err != nil || v.ID != "v2" {
		t.Fatalf("a Get begun after the invalidation finished = %+v, %v; want v2", v, err)
	}
}

// TestAReaderIsNotShedForAnother: a read beyond MaxConcurrentLoads fails
// at its own deadline, not at another's.
func TestAReaderIsNotShedForAnother(t *testing.T) {
	c := New[product](downClient(t), Options[product]{MaxConcurrentLoads: 1})
	release, started := make(chan struct{}), make(chan struct{})
	go c.Get(t.Context(), "busy", func(context.Context) (product, error) { close(started); <-release; return product{}, nil })
	<-started
	go func() { time.Sleep(300 * time.Millisecond); close(release) }()
	hurried, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	go c.Get(hurried, "k", func(context.Context) (product, error) { return product{ID: "hurried"}, nil })
	time.Sleep(5 * time.Millisecond)
	if v, err := c.Get(t.Context(), "k", func(context.Context) (product, error) { return product{ID: "patient"}, nil }); err != nil || v.ID == "" {
		t.Fatalf("a reader with time to wait got %+v, %v", v, err)
	}
}
