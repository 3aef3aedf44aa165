package near

import (
	"context"
	"crypto/rand"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// eventually waits for cond, failing the test after 10 s: a bound on a
// wait, not on how fast anything is.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 10 s", what)
		}
	}
}

func channelName() string { return "near:test:" + rand.Text()[:8] }

func TestAnAnnouncementDropsWhatEveryTierHolds(t *testing.T) {
	client := testenv.Cache(t)
	name := channelName()
	ch := Open(client, ChannelOptions{Channel: name})
	t.Cleanup(ch.Close)
	products, users := New[string](ch, Options{}), New[int](ch, Options{})
	eventually(t, "subscribed", ch.Subscribed)
	products.Reserve("cache:product:1")("boots", false, 10, time.Now().Add(time.Hour))
	users.Reserve("cache:user:1")(7, false, 10, time.Now().Add(time.Hour))
	if v, _, ok := products.Get("cache:product:1"); !ok || v != "boots" {
		t.Fatalf("Get = %q, %v: the read was not kept", v, ok)
	}
	worker := announce.NewPublisher(announce.Valkey(client), name)
	if err := worker.Announce(t.Context(), time.Now(), []string{"cache:product:1", "cache:user:1"}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "dropped", func() bool {
		_, _, p := products.Get("cache:product:1")
		_, _, u := users.Get("cache:user:1")
		return !p && !u
	})
	if s := ch.Stats(); s.Keys < 2 || s.Publishers < 1 || len(s.Flushes) != 0 {
		t.Fatalf("stats %+v: want the keys counted, the worker followed and no flush", s)
	}
}

// process is one service process of a test: a channel and a tier.
type process struct {
	ch   *Channel
	tier *Tier[string]
}

func open(t *testing.T, client valkey.Client, name string) process {
	t.Helper()
	ch := Open(client, ChannelOptions{Channel: name, Logger: discard})
	t.Cleanup(ch.Close)
	p := process{ch, New[string](ch, Options{})}
	eventually(t, "subscribed", ch.Subscribed)
	return p
}

func (p process) fill(key, value string) bool {
	keep := p.tier.Reserve(key)
	if keep == nil {
		return false
	}
	keep(value, false, len(value), time.Now().Add(time.Hour))
	_, _, ok := p.tier.Get(key)
	return ok
}

func (p process) holds(key string) bool { _, _, ok := p.tier.Get(key); return ok }

func TestAProcessWritesDropEverywhere(t *testing.T) {
	client := testenv.Cache(t)
	name := channelName()
	a, b := open(t, client, name), open(t, client, name)
	if !a.fill("cache:k", "old") || !b.fill("cache:k", "old") {
		t.Fatal("not kept")
	}
	if err := a.tier.Drop(t.Context(), "cache:k"); err != nil {
		t.Fatal(err)
	}
	if a.holds("cache:k") {
		t.Fatal("the writer still holds its key")
	}
	eventually(t, "dropped in the other process", func() bool { return !b.holds("cache:k") })
}

func TestAnAnnouncementNotSentFlushesTheOthers(t *testing.T) {
	client := testenv.Cache(t)
	name := channelName()
	a, b := open(t, client, name), open(t, client, name)
	if !b.fill("cache:other", "v") {
		t.Fatal("not kept")
	}
	// b never heard a (idle processes are quiet): a's next message says
	// what it failed to send.
	a.ch.pub.Skip() // as a Drop whose PUBLISH failed
	eventually(t, "flushed at the writer's next heartbeat", func() bool { return b.ch.Stats().Flushes[CauseGap] == 1 })
	if b.holds("cache:other") {
		t.Fatal("still held after the gap")
	}
}

// TestAForgedNumberNeverHidesAGap: a user that may publish forges the
// worker's ID with a number no publisher reaches. The tier flushes, and
// when the worker's next announcement is lost on the way its next
// heartbeat still shows it: the value read after the forgery is not kept
// past it.
func TestAForgedNumberNeverHidesAGap(t *testing.T) {
	client := testenv.Cache(t)
	for _, forged := range []uint64{math.MaxUint64 - 1, math.MaxUint64} {
		name := channelName()
		p := open(t, client, name)
		wire := &lossy{Sender: announce.Valkey(client)}
		worker := announce.NewPublisher(wire, name)
		if err := worker.Heartbeat(t.Context()); err != nil {
			t.Fatal(err)
		}
		eventually(t, "following the worker", func() bool { return p.ch.Stats().Publishers == 1 })
		m := announce.Message{Publisher: worker.ID(), Since: time.Now(), Seq: forged, At: time.Now()}
		if err := client.Do(t.Context(), client.B().Publish().Channel(name).Message(m.Encode()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "flushed for the forged number", func() bool { return p.ch.Stats().Flushes[CauseOrder] == 1 })
		if !p.fill("cache:k", "old") {
			t.Fatal("not kept")
		}
		wire.lose.Store(true)
		if err := worker.Announce(t.Context(), time.Now(), []string{"cache:k"}, nil); err != nil {
			t.Fatal(err)
		}
		wire.lose.Store(false)
		if err := worker.Heartbeat(t.Context()); err != nil {
			t.Fatal(err)
		}
		eventually(t, "dropped at the worker's next heartbeat", func() bool { return !p.holds("cache:k") })
		if s := p.ch.Stats(); s.Missed < 0 || s.Missed > 1 {
			t.Fatalf("forged %d: %d missed", forged, s.Missed)
		}
	}
}

// lossy is a wire that loses messages on the way while lose is set: sent,
// as far as the publisher can tell.
type lossy struct {
	announce.Sender
	lose atomic.Bool
}

func (l *lossy) Publish(ctx context.Context, channel, message string) error {
	if l.lose.Load() {
		return nil
	}
	return l.Sender.Publish(ctx, channel, message)
}

func TestKilledSubscriptionsFlushAndComeBack(t *testing.T) {
	client := testenv.Cache(t)
	name := channelName()
	p := open(t, client, name)
	if !p.fill("cache:k", "v") {
		t.Fatal("not kept")
	}
	for _, node := range client.Nodes() {
		if err := node.Do(t.Context(), node.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "flushed", func() bool { return p.ch.Stats().Flushes[CauseLost] >= 1 })
	if p.holds("cache:k") {
		t.Fatal("still held after the subscription was killed")
	}
	eventually(t, "subscribed again", p.ch.Subscribed)
	worker := announce.NewPublisher(announce.Valkey(client), name)
	if !p.fill("cache:k", "v") {
		t.Fatal("not kept once subscribed again")
	}
	if err := worker.Announce(t.Context(), time.Now(), []string{"cache:k"}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "dropped on the new subscription", func() bool { return !p.holds("cache:k") })
}

func TestANodeFrozenOrGoneIsLeftForAnother(t *testing.T) {
	cluster := testenv.StartCluster(t, "near-nodes", 7251)
	client, err := elasticache.New(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	p := open(t, client, channelName())
	port := func() int {
		_, port, _ := strings.Cut(p.ch.Stats().Node, ":")
		n, _ := strconv.Atoi(port)
		return n
	}
	frozen := port()
	if !p.fill("cache:k", "v") {
		t.Fatal("not kept")
	}
	cluster.Freeze(t, frozen) // its connections stay open: only silence tells
	eventually(t, "flushed for silence", func() bool { return p.ch.Stats().Flushes[CauseSilent] >= 1 })
	if p.holds("cache:k") {
		t.Fatal("still held while the subscription is silent")
	}
	eventually(t, "subscribed on another node", func() bool { return p.ch.Subscribed() && port() != frozen })
	cluster.Thaw(t, frozen)
	gone := port()
	if !p.fill("cache:k", "v") {
		t.Fatal("not kept")
	}
	cluster.StopNode(t, gone)
	eventually(t, "flushed for the lost connection", func() bool { return p.ch.Stats().Flushes[CauseLost] >= 1 })
	if p.holds("cache:k") {
		t.Fatal("still held after the node went")
	}
	eventually(t, "subscribed on another node", func() bool { return p.ch.Subscribed() && port() != gone })
}

// A process that stops reading its subscription — frozen between Lambda
// invokes, starved of CPU — has announcements waiting unread: its tiers
// must stop serving within a heartbeat and a silence, before it reads
// them, not keep serving what they drop.
func TestATierThatStopsHearingStopsServing(t *testing.T) {
	client := testenv.Cache(t)
	name := channelName()
	ch := Open(client, ChannelOptions{Channel: name, Heartbeat: 100 * time.Millisecond, Silence: 300 * time.Millisecond, Logger: discard})
	t.Cleanup(ch.Close)
	tier := New[string](ch, Options{})
	eventually(t, "subscribed", ch.Subscribed)
	tier.Reserve("cache:product:1")("boots", false, 10, time.Now().Add(time.Hour))
	// The subscription's goroutine stops at the next announcement, as a
	// frozen process's would: it cannot apply it, nor read a PING's answer.
	ch.mu.Lock()
	var resume sync.Once
	t.Cleanup(func() { resume.Do(ch.mu.Unlock) }) // before Close's, which needs it
	worker := announce.NewPublisher(announce.Valkey(client), name)
	if err := worker.Announce(t.Context(), time.Now(), []string{"cache:product:1"}, nil); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	eventually(t, "serving nothing", func() bool { _, _, ok := tier.Get("cache:product:1"); return !ok })
	if waited := time.Since(stopped); waited > 2*time.Second {
		t.Errorf("the tier served for %v after its subscription stopped", waited)
	}
	resume.Do(ch.mu.Unlock)
	eventually(t, "serving again", func() bool {
		if keep := tier.Reserve("cache:product:2"); keep != nil {
			keep("laces", false, 10, time.Now().Add(time.Hour))
		}
		_, _, ok := tier.Get("cache:product:2")
		return ok
	})
	if _, _, ok := tier.Get("cache:product:1"); ok {
		t.Fatal("the dropped entry is served again")
	}
}
