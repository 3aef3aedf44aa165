package near

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/invalidate/announce"
)

// The torture test drives a channel and a tier through random
// interleavings of reads (each reserved, then reading the shared cache,
// then kept, steps apart), changes deleted and announced by two workers,
// this process's own writes, heartbeats, messages lost on the way,
// undecodable ones, forged ones, and subscriptions lost and made again. On every hit
// the tier must hold at least the version of every change whose
// announcement this process has heard of: delivered, or numbered before
// one delivered from the same publisher — which the process knows it
// missed. A message lost is made up for only by the flush on the gap.
// With StaleIfError, the shared cache also goes down and comes back: while
// it is down, a miss asks Stale, and a read loads from the source and is
// kept; what Stale serves must pass the same check, so nothing kept from
// before the cache last answered, nor older than this process's writes.

// wire is the channel between the publishers and the subscription: what
// was published, in order, some of it lost on the way.
type wire struct {
	queue []sent
	lose  bool              // the next message published is lost
	cover map[string]int    // the versions the next message's deletes covered
	byPub map[string][]sent // every message sent, by publisher
}

type sent struct {
	m      announce.Message
	raw    string
	lost   bool
	cover  map[string]int
	forged bool // not the publisher's: the process hears of nothing by it
}

func (w *wire) Publish(_ context.Context, _, payload string) error {
	m, err := announce.Decode(payload)
	if err != nil {
		return err
	}
	s := sent{m: m, raw: payload, lost: w.lose, cover: w.cover}
	w.queue = append(w.queue, s)
	w.byPub[m.Publisher] = append(w.byPub[m.Publisher], s)
	w.lose, w.cover = false, nil
	return nil
}

// torture is the world of one run.
type torture struct {
	t        *testing.T
	r        *rand.Rand
	ch       *Channel
	tier     *Tier[int]
	wire     *wire
	workers  []*announce.Publisher
	source   map[string]int    // the database
	shared   map[string]int    // the shared cache: a correct one
	required map[string]int    // the least version a hit may show
	known    map[string]uint64 // by publisher: up to which number the process heard of
	heard    map[string]bool   // publishers heard on this subscription
	session  uint64
	up       bool
	down     bool // the shared cache does not answer (StaleIfError's runs)
	reads    []*read
	hits     int
	stale    int // hits served by Stale
	trace    []string
}

type read struct {
	key   string
	keep  func(int, bool, int, time.Time)
	value int
	read  bool // the shared cache was read
}

const tortureKeys = 6

func newTorture(t *testing.T, seed uint64, staleIfError time.Duration) *torture {
	w := &wire{byPub: map[string][]sent{}}
	x := &torture{t: t, r: rand.New(rand.NewPCG(seed, 0)), wire: w, source: map[string]int{}, shared: map[string]int{},
		required: map[string]int{}, known: map[string]uint64{}, heard: map[string]bool{}}
	x.ch = newChannel(w, ChannelOptions{Channel: "torture", Logger: discard})
	x.tier = New[int](x.ch, Options{MaxEntries: 4, MaxLifetime: time.Hour, StaleIfError: staleIfError})
	for range 2 {
		x.workers = append(x.workers, announce.NewPublisher(w, "torture"))
	}
	for i := range tortureKeys {
		x.source[x.key(i)] = 1
	}
	x.subscribe()
	return x
}

func (x *torture) key(i int) string { return "cache:k:" + strconv.Itoa(i) }

func (x *torture) log(format string, args ...any) {
	x.trace = append(x.trace, fmt.Sprintf(format, args...))
}

func (x *torture) subscribe() {
	x.ch.subscribed(x.session, time.Now(), "node")
	x.up, x.heard = true, map[string]bool{}
	x.log("subscribed")
}

func (x *torture) step() {
	if x.tier.staleIfError > 0 && x.r.IntN(1000) < map[bool]int{false: 5, true: 30}[x.down] {
		x.outage()
		return
	}
	switch n := x.r.IntN(1000); {
	case n < 250:
		if len(x.reads) < 8 {
			x.startRead()
		}
	case n < 450:
		x.readShared()
	case n < 650:
		x.keep()
	case n < 750:
		x.change()
	case n < 780:
		x.ownWrite()
	case n < 950:
		x.deliver()
	case n < 985:
		w := x.workers[x.r.IntN(len(x.workers))]
		x.wire.lose = x.heard[w.ID()] && x.r.IntN(10) == 0
		_ = w.Heartbeat(context.Background())
		x.log("heartbeat of %s (lost %v)", w.ID(), x.wire.queue[len(x.wire.queue)-1].lost)
	case n < 995:
		if x.up {
			x.ch.lost(x.session, CauseLost, errors.New("connection closed"))
			x.session++
			x.up = false
			x.wire.queue = nil // in flight to the connection that closed
			x.log("subscription lost")
		} else if !x.down {
			x.subscribe()
		}
	case n < 997:
		x.ch.receive(x.session, "not an announcement")
		x.log("undecodable message")
	case n < 998:
		x.forge()
	default:
		if !x.up && !x.down {
			x.subscribe()
		}
	}
}

// outage takes the shared cache down, and the subscription with it, or
// brings it back: a call of a Cache's answers first.
func (x *torture) outage() {
	if x.down = !x.down; !x.down {
		x.tier.Answered()
		x.log("the cache answers")
		return
	}
	if x.up {
		x.ch.lost(x.session, CauseLost, errors.New("the cache is down"))
		x.session++
		x.up = false
		x.wire.queue = nil
	}
	x.log("the cache is down")
}

// startRead reads key through the tier: a hit is checked (while the cache
// is down, one of Stale's too); a miss reserves.
func (x *torture) startRead() {
	k := x.key(x.r.IntN(tortureKeys))
	v, _, ok := x.tier.Get(k)
	what, count := "hit", &x.hits
	if !ok && x.down {
		v, _, ok = x.tier.Stale(k)
		what, count = "stale read", &x.stale
	}
	if ok {
		*count++
		x.log("%s %s v%d (required v%d)", what, k, v, x.required[k])
		if v < x.required[k] {
			x.fail("%s: %s holds v%d, the process heard of v%d", what, k, v, x.required[k])
		}
		return
	}
	x.reads = append(x.reads, &read{key: k, keep: x.tier.Reserve(k)})
	x.log("miss %s, reserved %v", k, x.reads[len(x.reads)-1].keep != nil)
}

func (x *torture) readShared() {
	for _, i := range x.r.Perm(len(x.reads)) {
		if rd := x.reads[i]; !rd.read {
			if _, ok := x.shared[rd.key]; !ok && !x.down {
				x.shared[rd.key] = x.source[rd.key] // a fill under its lease
			}
			rd.value, rd.read = x.shared[rd.key], true
			if x.down {
				rd.value = x.source[rd.key] // loaded directly
			}
			x.log("shared read %s v%d", rd.key, rd.value)
			return
		}
	}
}

func (x *torture) keep() {
	for _, i := range x.r.Perm(len(x.reads)) {
		if rd := x.reads[i]; rd.read {
			x.reads = append(x.reads[:i], x.reads[i+1:]...)
			if rd.keep != nil {
				rd.keep(rd.value, false, 8, time.Now().Add(time.Hour))
			}
			x.log("keep %s v%d", rd.key, rd.value)
			return
		}
	}
}

// change writes a few keys at the source; a worker deletes them, then
// announces them in one message.
func (x *torture) change() {
	w := x.workers[x.r.IntN(len(x.workers))]
	cover := map[string]int{}
	var keys []string
	for range 1 + x.r.IntN(3) {
		k := x.key(x.r.IntN(tortureKeys))
		x.source[k]++
		delete(x.shared, k)
		cover[k] = x.source[k]
		keys = append(keys, k)
	}
	x.wire.cover, x.wire.lose = cover, x.heard[w.ID()] && x.r.IntN(10) == 0
	_ = w.Announce(context.Background(), time.Now(), keys, nil)
	x.log("change %v by %s (lost %v)", cover, w.ID(), x.wire.queue[len(x.wire.queue)-1].lost)
}

// ownWrite is this process's own write: Drop at once, then announced.
func (x *torture) ownWrite() {
	k := x.key(x.r.IntN(tortureKeys))
	x.source[k]++
	delete(x.shared, k)
	x.wire.cover = map[string]int{k: x.source[k]}
	_ = x.tier.Drop(context.Background(), k)
	x.wire.cover = nil
	x.required[k] = max(x.required[k], x.source[k]) // this process knows at once
	x.log("own write %s v%d", k, x.source[k])
}

// deliver hands the next message to the subscription; one lost is
// skipped. What the process then knows of its publisher grows to its
// number.
func (x *torture) deliver() {
	if len(x.wire.queue) == 0 || !x.up {
		return
	}
	s := x.wire.queue[0]
	x.wire.queue = x.wire.queue[1:]
	if s.lost {
		x.log("lost seq %d of %s", s.m.Seq, s.m.Publisher)
		return
	}
	x.ch.receive(x.session, s.raw)
	if s.forged {
		x.log("delivered forged seq %d of %s", s.m.Seq, s.m.Publisher)
		return
	}
	x.heard[s.m.Publisher] = true
	for _, earlier := range x.wire.byPub[s.m.Publisher] {
		if earlier.m.Seq > x.known[s.m.Publisher] && earlier.m.Seq <= s.m.Seq {
			for k, v := range earlier.cover {
				x.required[k] = max(x.required[k], v)
			}
		}
	}
	x.known[s.m.Publisher] = max(x.known[s.m.Publisher], s.m.Seq)
	x.log("delivered seq %d of %s %v", s.m.Seq, s.m.Publisher, s.m.Keys)
}

// forge puts on the wire what a user that may publish could: under a
// worker's ID, a number it never reaches or one it already used, or under
// an ID of its own; no keys. (A forged number the worker reaches later,
// with that real message then lost on the way, is the one forgery the
// tiers cannot tell: hence only the worker and writers may publish.)
func (x *torture) forge() {
	w := x.workers[x.r.IntN(len(x.workers))]
	m := announce.Message{Publisher: w.ID(), Since: time.Now(), At: time.Now()}
	switch sent := x.wire.byPub[w.ID()]; x.r.IntN(4) {
	case 0:
		m.Seq = math.MaxUint64 - uint64(x.r.IntN(2))
	case 1:
		m.Seq = 1<<40 + x.r.Uint64N(1<<20)
	case 2:
		if len(sent) == 0 {
			return
		}
		m.Seq = sent[x.r.IntN(len(sent))].m.Seq
	default:
		m.Publisher, m.Seq = "forged-"+strconv.Itoa(x.r.IntN(3)), 1+x.r.Uint64N(1<<30)
	}
	x.wire.queue = append(x.wire.queue, sent{m: m, raw: m.Encode(), forged: true})
	x.log("forged seq %d of %s", m.Seq, m.Publisher)
}

func (x *torture) fail(format string, args ...any) {
	x.t.Helper()
	tail := x.trace[max(0, len(x.trace)-40):]
	x.t.Fatalf(format+"\nlast steps:\n  %s", append(args, strings.Join(tail, "\n  "))...)
}

func TestTortureNoHitOlderThanWhatTheProcessHeardOf(t *testing.T) {
	for _, staleIfError := range []time.Duration{0, time.Hour} {
		hits, stale := 0, 0
		for seed := range uint64(300) {
			x := newTorture(t, seed, staleIfError)
			for range 3000 {
				x.step()
			}
			hits, stale = hits+x.hits, stale+x.stale
		}
		t.Logf("StaleIfError %v: %d hits checked, %d of Stale's", staleIfError, hits, stale)
		if hits < 5_000 || staleIfError > 0 && stale < 1_000 {
			t.Fatalf("only %d hits, %d of Stale's, in all runs: the torture tortures nothing", hits, stale)
		}
	}
}

// TestConcurrentReadsDropsAndFlushes runs the tier's paths at once, for
// the race detector: reads kept while keys are dropped, announcements
// received, and the subscription lost and made again.
func TestConcurrentReadsDropsAndFlushes(t *testing.T) {
	w := &wire{byPub: map[string][]sent{}}
	ch := newChannel(w, ChannelOptions{Channel: "torture", Logger: discard, ReadOnly: true})
	tier := New[int](ch, Options{MaxBytes: 4 << 10})
	ch.subscribed(0, time.Now(), "node")
	worker := announce.NewPublisher(&wire{byPub: map[string][]sent{}}, "torture")
	ctx, stop := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer stop()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				k := "cache:k:" + strconv.Itoa((g*7+i)%50)
				if _, _, ok := tier.Get(k); !ok {
					if keep := tier.Reserve(k); keep != nil {
						keep(i, false, 100, time.Now().Add(time.Minute))
					}
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_ = tier.Drop(ctx, "cache:k:"+strconv.Itoa(i%50))
		}
	})
	wg.Go(func() {
		var session uint64
		for i := 0; ctx.Err() == nil; i++ {
			_ = worker.Announce(ctx, time.Now(), []string{"cache:k:" + strconv.Itoa(i%50)}, nil)
			ch.receive(session, (announce.Message{Publisher: worker.ID(), Since: time.Now(), Seq: uint64(i + 1), At: time.Now(),
				Keys: []string{"cache:k:" + strconv.Itoa(i%50)}}).Encode())
			if i%100 == 99 {
				ch.lost(session, CauseLost, errors.New("closed"))
				session++
				ch.subscribed(session, time.Now(), "node")
			}
			_ = ch.Stats()
		}
	})
	wg.Wait()
	if s := tier.Stats(); s.Kept == 0 || s.Hits == 0 || s.Dropped == 0 {
		t.Fatalf("stats %+v: every path should have run", s)
	}
}
