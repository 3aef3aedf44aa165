package near

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/invalidate/announce"
)

// TestALossFromAPublisherNeverHeardShows: a publisher running before the
// subscription and quiet since, whose announcement is lost on the way:
// its next message, the first this process hears of it, says when its
// previous one was numbered — while the subscription listened — and the
// tier flushes.
func TestALossFromAPublisherNeverHeardShows(t *testing.T) {
	ch := newChannel(&wire{byPub: map[string][]sent{}}, ChannelOptions{Channel: "quiet", Logger: discard, ReadOnly: true})
	tier := New[int](ch, Options{MaxLifetime: time.Hour})
	from := time.Now().Add(-time.Minute)
	ch.subscribed(0, from, "node")
	tier.Reserve("cache:k")(1, false, 8, time.Now().Add(time.Hour))
	lost := from.Add(30 * time.Second) // the announcement of cache:k, never delivered
	next := announce.Message{Publisher: "worker", Since: from.Add(-time.Hour), Seq: 41, Prev: lost, At: time.Now()}
	ch.receive(0, next.Encode())
	ch.hear(time.Now()) // a PING answered after it
	if _, _, held := tier.Get("cache:k"); held {
		t.Fatalf("still held after the loss showed; flushes %v", ch.Stats().Flushes)
	}
}

// TestAMessageVouchesForNoneBehindIt: a process that thaws after its
// subscription was last heard applies the first of the messages waiting
// on its connection while the next waits unread: it serves nothing until
// a PING answered after them all.
func TestAMessageVouchesForNoneBehindIt(t *testing.T) {
	ch := newChannel(&wire{byPub: map[string][]sent{}}, ChannelOptions{Channel: "thaw", Logger: discard, ReadOnly: true})
	tier := New[int](ch, Options{MaxLifetime: time.Hour})
	ch.subscribed(0, time.Now(), "node")
	for _, k := range []string{"cache:a", "cache:b"} {
		tier.Reserve(k)(1, false, 8, time.Now().Add(time.Hour))
	}
	ch.hear(time.Now().Add(-time.Minute)) // frozen since
	worker := announce.Message{Publisher: "worker", Since: time.Now(), Seq: 1, At: time.Now(), Keys: []string{"cache:a"}}
	ch.receive(0, worker.Encode()) // the announcement of cache:b waits behind it
	if _, _, held := tier.Get("cache:b"); held {
		t.Fatal("cache:b served with its announcement unread")
	}
	ch.hear(time.Now())
	if _, _, held := tier.Get("cache:b"); !held {
		t.Fatal("cache:b not served after a PING answered")
	}
}

// TestAWriteGivenUpBeforeItsTurnIsTold: a process's write whose
// announcement waits behind a slow heartbeat past its Timeout returns
// ErrAnnounce, and the others flush at its next message.
func TestAWriteGivenUpBeforeItsTurnIsTold(t *testing.T) {
	g := &gated{entered: make(chan struct{}), release: make(chan struct{})}
	a := newChannel(g, ChannelOptions{Channel: "c", Logger: discard, Timeout: 50 * time.Millisecond})
	tierA := New[int](a, Options{})
	a.subscribed(0, time.Now(), "node")
	b := newChannel(g, ChannelOptions{Channel: "c", Logger: discard, ReadOnly: true})
	tierB := New[int](b, Options{})
	b.subscribed(0, time.Now(), "node")
	tierB.Reserve("cache:k")(1, false, 8, time.Now().Add(time.Hour))
	g.block()
	beat := make(chan error)
	go func() { beat <- a.pub.Heartbeat(context.Background()) }() // slow, and it holds the turn
	<-g.entered
	if err := tierA.Drop(context.Background(), "cache:k"); !errors.Is(err, ErrAnnounce) {
		t.Fatalf("Drop = %v, want ErrAnnounce", err)
	}
	close(g.release)
	if err := <-beat; err != nil {
		t.Fatal(err)
	}
	if err := a.pub.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range g.published() {
		b.receive(0, p)
	}
	if _, _, held := tierB.Get("cache:k"); held {
		t.Fatalf("b still holds cache:k; flushes %v", b.Stats().Flushes)
	}
}

// gated is a wire whose next Publish, once blocked, waits for release.
type gated struct {
	mu               sync.Mutex
	out              []string
	blocked          bool
	entered, release chan struct{}
}

func (g *gated) block() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked = true
}

func (g *gated) Publish(_ context.Context, _, payload string) error {
	g.mu.Lock()
	blocked := g.blocked
	g.blocked = false
	g.mu.Unlock()
	if blocked {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out = append(g.out, payload)
	return nil
}

func (g *gated) published() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out
}
