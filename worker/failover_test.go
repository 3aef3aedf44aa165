package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

const windowURL = testQueueURL + "-window"

// windowWorker is a worker whose batches go to a failover window in
// the fake queues, through cache.
func windowWorker(cache invalidate.Cache, sqsFake *queuestest.SQS, logs io.Writer) *Worker {
	inv := invalidate.New(cache, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	return New(inv, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: io.Discard, DeadlineMargin: 100 * time.Millisecond,
		Window: &Window{Client: sqsFake, URLs: []string{windowURL}}})
}

func userRecords(ids ...string) invalidate.Batch {
	records := make([]invalidate.Record, len(ids))
	for i, id := range ids {
		records[i] = invalidate.Record{ID: id, Changes: []events.Change{{Entity: "user", ID: id}}}
	}
	return invalidate.Decoded(records)
}

// TestTheWindowIsDeletedAgainAfterASign: what any batch deleted is in the
// window; after a sign of a failover, the next batch of any worker deletes
// all of it again — once in the fleet — and says why.
func TestTheWindowIsDeletedAgainAfterASign(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	cache := &cachetest.Cache{}
	var logs bytes.Buffer
	first, other := windowWorker(cache, sqsFake, io.Discard), windowWorker(cache, sqsFake, &logs)
	defer first.Close()
	defer other.Close()
	first.Handle(deadline(t), events.SourceSQS, userRecords("1", "2"), nil)
	// The first worker is never invoked again; the other sees the sign.
	other.signs.started([]string{"node:1"})
	other.signs.connectedTo("node:1")
	other.signs.connectedTo("node:1")
	other.Handle(deadline(t), events.SourceSQS, userRecords("3"), nil)
	for _, key := range []string{"cache:user:1", "cache:user:2"} {
		if n := cache.Attempts(key); n != 2 {
			t.Errorf("%s deleted %d times, want again after the sign", key, n)
		}
	}
	if !strings.Contains(logs.String(), `"msg":"keys deleted again after a sign of a failover"`) ||
		!strings.Contains(logs.String(), `"sign":"reconnected to node:1"`) || !strings.Contains(logs.String(), `"again_failover_keys":`) {
		t.Fatalf("the re-delete's lines do not say it, or why: %s", logs.String())
	}
	// Read once: another sign finds the window read, but for the batch after
	// the first re-delete.
	other.signs.connectedTo("node:1")
	other.Handle(deadline(t), events.SourceSQS, userRecords("4"), nil)
	if n := cache.Attempts("cache:user:1"); n != 2 {
		t.Errorf("cache:user:1 deleted %d times, want the window read once", n)
	}
	if n := cache.Attempts("cache:user:3"); n != 2 {
		t.Errorf("cache:user:3 deleted %d times: want the batch of the first sign in the window, and deleted again at the second", n)
	}
}

// TestASignsPassIsFollowedByAnother: a sign may come before the promotion
// (a connection cut while the old primary still takes deletes, which it
// then loses): the window its pass read is read again, all of it, by the
// pass that follows, windowHide later, whichever sign comes meanwhile.
func TestASignsPassIsFollowedByAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sqsFake := &queuestest.SQS{}
		cache := &cachetest.Cache{}
		var logs bytes.Buffer
		w := windowWorker(cache, sqsFake, &logs)
		defer w.Close()
		w.signs.started([]string{"node:1"})
		w.Handle(deadline(t), events.SourceSQS, userRecords("1", "2"), nil)
		w.signs.connectedTo("node:1")
		w.signs.connectedTo("node:1") // the cut, before the promotion
		w.Handle(deadline(t), events.SourceSQS, userRecords("3"), nil)
		attempts := func(key string) int { return cache.Attempts(key) }
		if n := attempts("cache:user:1"); n != 2 {
			t.Fatalf("cache:user:1 deleted %d times, want again after the sign", n)
		}
		// The promotion's sign, within the hide: its pass finds the first
		// pass's messages hidden, and reads its own batch's.
		time.Sleep(time.Second)
		w.signs.connectedTo("node:1")
		w.Handle(deadline(t), events.SourceSQS, userRecords("4"), nil)
		for key, want := range map[string]int{"cache:user:1": 2, "cache:user:3": 2, "cache:user:4": 2} {
			if n := attempts(key); n != want {
				t.Fatalf("%s deleted %d times within the hide, want %d", key, n, want)
			}
		}
		// The pass that follows, once due, reads the window again, all of it.
		time.Sleep(windowHide)
		w.Handle(deadline(t), events.SourceSQS, userRecords("5"), nil)
		for key, want := range map[string]int{"cache:user:1": 3, "cache:user:2": 3, "cache:user:3": 3, "cache:user:4": 3, "cache:user:5": 2} {
			if n := attempts(key); n != want {
				t.Errorf("%s deleted %d times, want %d: the follow-up reads all the window", key, n, want)
			}
		}
		if !strings.Contains(logs.String(), `"follow_up":true`) {
			t.Errorf("no pass logged as a follow-up: %s", logs.String())
		}
		// And none follows a follow-up.
		time.Sleep(2 * windowHide)
		w.Handle(deadline(t), events.SourceSQS, userRecords("6"), nil)
		if n := attempts("cache:user:1"); n != 3 {
			t.Errorf("cache:user:1 deleted %d times, want no pass after the follow-up", n)
		}
	})
}

// slowWindow is a window's SQS on a busy machine: each receive takes
// receive, and showing messages again takes until its context ends.
type slowWindow struct {
	*queuestest.SQS
	receive time.Duration
}

func (s slowWindow) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	time.Sleep(s.receive)
	return s.SQS.ReceiveMessage(ctx, in, opts...)
}

func (s slowWindow) ChangeMessageVisibilityBatch(ctx context.Context, _ *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAPassEndsWithinItsTurn: a pass over a full window on a slow SQS,
// whose keys fail for now, ends within its turn and before the batch's
// deadline less its margin, showing the window again included: the
// answer — parking, handing back — has the rest of the invoke.
func TestAPassEndsWithinItsTurn(t *testing.T) {
	for _, left := range []time.Duration{10 * time.Second, 1600 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			sqsFake := &queuestest.SQS{}
			for i := range 200 {
				sqsFake.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(windowURL),
					MessageBody: aws.String(`{"keys":["cache:window:` + strconv.Itoa(i) + `"],"secondDelete":true}`)})
			}
			cache := &cachetest.Cache{Fail: func(key string, _ int) error {
				if strings.HasPrefix(key, "cache:window:") {
					return cachetest.ErrRefused
				}
				return nil
			}}
			const margin = time.Second
			inv := invalidate.New(cache, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
			w := New(inv, Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, DeadlineMargin: margin,
				Window: &Window{Client: slowWindow{sqsFake, 300 * time.Millisecond}, URLs: []string{windowURL}}})
			defer w.Close()
			w.signs.started([]string{"node:1"})
			w.signs.connectedTo("node:1")
			w.signs.connectedTo("node:1")
			ctx := deadlineIn(t, left)
			deadline, _ := ctx.Deadline()
			start := time.Now()
			w.Handle(ctx, events.SourceSQS, userRecords("1"), nil)
			if took := time.Since(start); took > windowTurn {
				t.Errorf("with %v left, the batch took %v: want its pass within its turn, %v", left, took, windowTurn)
			}
			if rest := time.Until(deadline); rest < min(margin, left/2) {
				t.Errorf("with %v left, the batch answered %v before its deadline: want its margin, %v, for the answer", left, rest, min(margin, left/2))
			}
			if cache.Attempts("cache:window:0") == 0 {
				t.Error("the window was not read")
			}
		})
	}
}

// TestAPassReadsTheNewestSlotFirst: the deletes a failover lost are the
// window's newest. On a slow SQS that hands a queue out oldest first, the
// batch that sees the sign reads two rounds in its turn: a minute of the
// fleet's batches in one queue keeps them from it; in slots, it reads the
// slot of the moment first, and them in its turn; the batches after go
// on with the older slots.
func TestAPassReadsTheNewestSlotFirst(t *testing.T) {
	for _, slots := range []int{1, 4} {
		t.Run(strconv.Itoa(slots)+" slots", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sqsFake := &queuestest.SQS{}
				urls := make([]string, slots)
				for i := range urls {
					urls[i] = windowURL + "-" + strconv.Itoa(i+1)
				}
				window := &Window{Client: slowWindow{sqsFake, 300 * time.Millisecond}, URLs: urls}
				for i := range 110 { // a batch every 0.5 s
					if failed, _ := window.Add(t.Context(), []string{"cache:old:" + strconv.Itoa(i)}, nil); len(failed) > 0 {
						t.Fatal("the window took no message")
					}
					time.Sleep(500 * time.Millisecond)
				}
				window.Add(t.Context(), []string{"cache:lost"}, nil)
				cache := &cachetest.Cache{}
				inv := invalidate.New(cache, invalidate.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
				w := New(inv, Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard, DeadlineMargin: time.Second, Window: window})
				defer w.Close()
				w.signs.started([]string{"node:1"})
				w.signs.connectedTo("node:1")
				w.signs.connectedTo("node:1")
				w.Handle(deadlineIn(t, 10*time.Second), events.SourceSQS, userRecords("1"), nil)
				again := cache.Attempts("cache:lost")
				switch {
				case slots == 1 && again != 0:
					t.Fatal("one queue's pass reached the newest message in its first turn: the test no longer models a slow window")
				case slots > 1 && again != 1:
					t.Errorf("the newest message deleted again %d times in the sign's turn, want once: its slot is read first", again)
				}
				for range 10 { // the batches after go on with the pass
					w.Handle(deadlineIn(t, 10*time.Second), events.SourceSQS, userRecords("2"), nil)
				}
				for _, key := range []string{"cache:old:0", "cache:old:109", "cache:lost"} {
					if n := cache.Attempts(key); n != 1 {
						t.Errorf("%s deleted again %d times by the pass, want once: it reads every slot, each message once", key, n)
					}
				}
			})
		})
	}
}

// TestAPassMovesOnWhenItsSlotIsRead: a round of none unseen moves a pass
// to the slot before only when it was not full: messages a pass read show
// again after windowHide and, handed out oldest first, fill the round
// before the slot's unread tail — the newest deletes.
func TestAPassMovesOnWhenItsSlotIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sqsFake := &queuestest.SQS{}
		window := Window{Client: sqsFake, URLs: []string{windowURL + "-1", windowURL + "-2"}}
		for i := range 100 {
			window.Add(t.Context(), []string{"cache:m:" + strconv.Itoa(i)}, nil)
		}
		p := &pass{seen: map[string]bool{}}
		read := func() int {
			msgs, done, err := window.read(t.Context(), p)
			if err != nil || done {
				t.Fatalf("read: done %v, %v", done, err)
			}
			return len(msgs)
		}
		if n := read(); n != 40 {
			t.Fatalf("the first round read %d, want 40", n)
		}
		time.Sleep(windowHide + time.Second) // what it read shows again
		if n := read(); n != 0 || p.back != 0 {
			t.Fatalf("a full round of seen messages gave %d and moved the pass %d slots: want it kept on its slot", n, p.back)
		}
		for _, want := range []int{40, 20} {
			if n := read(); n != want {
				t.Fatalf("a round read %d, want %d: the slot's tail", n, want)
			}
		}
		if read(); p.back != 1 {
			t.Errorf("the slot read, the pass is %d slots back, want 1", p.back)
		}
	})
}

// TestASignWhileAPassGoesOn: a pass kept to go on with, past the newest
// slot, takes a new sign from the newest slot again, where that sign's
// lost deletes are, and as a sign's pass, followed by another.
func TestASignWhileAPassGoesOn(t *testing.T) {
	s := newSigns()
	s.started([]string{"node:1"})
	s.pending = &pass{cause: "before", followUp: true, seen: map[string]bool{"m": true}, begun: true, first: 2, back: 3}
	s.connectedTo("node:1")
	s.connectedTo("node:1")
	p := s.take(time.Now())
	if p.begun || p.back != 0 || p.followUp || !strings.HasPrefix(p.cause, "reconnected") || !p.seen["m"] {
		t.Errorf("the pass after a new sign: %+v, want it to begin again at the newest slot, as the sign's, what it read kept", p)
	}
}

// TestAWindowThatFailsForNowIsShownAgain: a re-delete that cannot reach its
// keys leaves them in the window and keeps the sign; the batch after the
// cache is back deletes them.
func TestAWindowThatFailsForNowIsShownAgain(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	var mu sync.Mutex
	down := false
	cache := &cachetest.Cache{Fail: func(key string, _ int) error {
		mu.Lock()
		defer mu.Unlock()
		if down && key == "cache:user:1" {
			return cachetest.ErrRefused
		}
		return nil
	}}
	w := windowWorker(cache, sqsFake, io.Discard)
	defer w.Close()
	w.Handle(deadline(t), events.SourceSQS, userRecords("1"), nil)
	mu.Lock()
	down = true
	mu.Unlock()
	w.signs.replied(cachetest.Reply("READONLY You can't write against a read only replica."))
	w.Handle(deadline(t), events.SourceSQS, userRecords("2"), nil)
	p := w.signs.take(time.Now())
	if p == nil {
		t.Fatal("the sign is gone though its re-delete failed")
	}
	w.signs.again(p)
	mu.Lock()
	down = false
	mu.Unlock()
	before := cache.Attempts("cache:user:1")
	w.Handle(deadline(t), events.SourceSQS, userRecords("3"), nil)
	if n := cache.Attempts("cache:user:1"); n <= before {
		t.Fatalf("cache:user:1 tried %d times, %d before the cache came back: want it deleted once it is", n, before)
	}
}

// TestSignsOfAFailover: which connections and replies are signs.
func TestSignsOfAFailover(t *testing.T) {
	s := newSigns()
	s.connectedTo("node:1") // before the start: the first client's own
	s.started([]string{"node:1", "node:2"})
	s.connectedTo("node:2") // a node known from the start, first dialed
	take := func() string {
		if p := s.take(time.Now()); p != nil {
			return p.cause
		}
		return ""
	}
	if cause := take(); cause != "" {
		t.Fatalf("a sign (%s) from a first connection", cause)
	}
	for _, tc := range []struct {
		note func()
		sign string
	}{
		{func() { s.connectedTo("node:1") }, "reconnected to node:1"},
		{func() { s.connectedTo("node:3") }, "connected to a new node node:3"},
		{func() { s.replied(nil, cachetest.Reply("READONLY You can't write against a read only replica.")) }, "the cache replied READONLY"},
		{func() { s.replied(cachetest.Reply("LOADING Valkey is loading the dataset in memory")) }, "the cache replied LOADING"},
		{func() { s.replied(cachetest.Reply("MASTERDOWN Link with MASTER is down")) }, "the cache replied MASTERDOWN"},
		{func() {
			s.replied(cachetest.ErrRefused, cachetest.Reply("CLUSTERDOWN The cluster is down"), cachetest.ErrNoPerm)
		}, ""},
	} {
		tc.note()
		if cause := take(); cause != tc.sign {
			t.Errorf("sign %q, want %q", cause, tc.sign)
		}
	}
	// The first sign is kept until taken.
	s.connectedTo("node:1")
	s.connectedTo("node:4")
	if cause := take(); cause != "reconnected to node:1" {
		t.Errorf("sign %q, want the first", cause)
	}
}

// TestTheFailoverSchedule: each key and tag goes to the delay queue twice,
// the second delete and the failover schedule's, each with its delay.
func TestTheFailoverSchedule(t *testing.T) {
	sqsFake := &queuestest.SQS{}
	q := delayQueue{Client: sqsFake, URL: testQueueURL + "-again", Delay: 2 * time.Second, FailoverAfter: time.Minute}
	if k, tg := q.Schedule(t.Context(), []string{"cache:user:1"}, []string{"list"}); len(k)+len(tg) != 0 {
		t.Fatalf("failed %v %v", k, tg)
	}
	got := map[string]int32{}
	for _, m := range sqsFake.Messages(q.URL) {
		got[m.Body] = int32(m.VisibleAt.Sub(m.Sent).Round(time.Second) / time.Second)
	}
	want := map[string]int32{
		`{"keys":["cache:user:1"],"secondDelete":true}`: 2, `{"tags":["list"],"secondDelete":true}`: 2,
		`{"keys":["cache:user:1"],"secondDelete":true,"failover":true}`: 60, `{"tags":["list"],"secondDelete":true,"failover":true}`: 60,
	}
	if len(got) != len(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	for body, delay := range want {
		if got[body] != delay {
			t.Errorf("%s: delay %d, want %d", body, got[body], delay)
		}
	}
	changes, err := events.DecodeSQSBody("m", `{"keys":["cache:user:1"],"secondDelete":true,"failover":true}`, "")
	if err != nil || len(changes) != 1 || !changes[0].SecondDelete || !changes[0].Failover {
		t.Fatalf("the failover schedule's message decodes to %+v, %v", changes, err)
	}
}

// TestAWindowThatCannotBeSentFailsItsRecords: a batch whose keys the
// window does not take is retried, as one whose second delete is not sent.
func TestAWindowThatCannotBeSentFailsItsRecords(t *testing.T) {
	sqsFake := &queuestest.SQS{Fail: func(op string) error {
		if op == "SendMessage" {
			return errors.New("the window's queue is unreachable")
		}
		return nil
	}}
	w := windowWorker(&cachetest.Cache{}, sqsFake, io.Discard)
	defer w.Close()
	rep := w.Handle(deadline(t), events.SourceSQS, userRecords("1"), nil)
	if res := rep.Records[0]; res.Fate != Retry || !res.Transient || !errors.Is(res.Err, errSecondDelete) {
		t.Fatalf("result %+v: want it retried", res)
	}
	out, err := sqsFake.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(windowURL)})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("the window holds %d messages (%v)", len(out.Messages), err)
	}
}
