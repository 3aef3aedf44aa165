package announce

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/invalidator-go/invalidator/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestMessageRoundTrip: messages as published — a change with keys and
// tags, one after a lost message, a heartbeat — are
// testdata/messages.golden.jsonl, one a line (-update rewrites it), and
// Decode reads each back as it was.
func TestMessageRoundTrip(t *testing.T) {
	at := time.UnixMicro(1_800_000_000_123_456)
	since := time.UnixMilli(1_799_999_000_000)
	var sent bytes.Buffer
	for _, m := range []Message{
		{Publisher: "p1", Since: since, Seq: 7, Prev: at.Add(-time.Second), At: at, Keys: []string{"cache:product:1", `odd"key`, "é\u2028"}, Tags: []string{"t"}},
		{Publisher: "p1", Since: since, Seq: 9, Prev: at, At: at.Add(time.Millisecond), Keys: []string{"k"}, Failed: 1},
		{Publisher: "p2", Since: since, Seq: 1, At: at},
	} {
		payload := m.Encode()
		sent.WriteString(payload + "\n")
		got, err := Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if got.Publisher != m.Publisher || !got.Since.Equal(m.Since) || got.Seq != m.Seq || !got.Prev.Equal(m.Prev) || !got.At.Equal(m.At) ||
			!slices.Equal(got.Keys, m.Keys) || !slices.Equal(got.Tags, m.Tags) || got.Failed != m.Failed || got.Heartbeat() != (len(m.Keys)+len(m.Tags) == 0) {
			t.Errorf("%s reads back as %+v, want %+v", payload, got, m)
		}
	}
	golden.Check(t, "testdata/messages.golden.jsonl", sent.Bytes(), *update)
}

func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	for _, payload := range []string{"", "not json", `{"v":2,"pub":"p","seq":1}`, `{"v":1,"seq":1}`, `{"v":1,"pub":"p"}`, `{"v":1,"pub":"p","seq":1,"keys":"k"}`} {
		if _, err := Decode(payload); !errors.Is(err, errFormat) {
			t.Errorf("Decode(%q) = %v, want ErrFormat", payload, err)
		}
	}
}

func TestSequencesTellWhatWasMissed(t *testing.T) {
	from := time.Unix(1000, 0)
	s := NewSequences(from)
	old := Message{Publisher: "old", Since: from.Add(-time.Hour)}
	young := Message{Publisher: "young", Since: from.Add(time.Minute)}
	for i, c := range []struct {
		m      Message
		seq    uint64
		missed uint64
		doubt  error
	}{
		{old, 40, 0, nil},      // started before: its earlier messages went to nobody here
		{old, 41, 0, nil},      // the next one
		{old, 41, 0, errOrder}, // sent twice: a doubt, which flushes
		{old, 44, 2, nil},      // 42 and 43 lost
		{old, 43, 0, errOrder}, // late
		{old, 44, 0, nil},      // after the late one: in order again
		{young, 1, 0, nil},     // started after: its first
		{young, 3, 1, nil},     // 2 lost
		{Message{Publisher: "late", Since: from.Add(time.Minute)}, 2, 1, nil}, // its first was lost
		{Message{Publisher: "close", Since: from.Add(skew / 2)}, 5, 0, nil},   // within the clocks' skew: may have come before
	} {
		c.m.Seq = c.seq
		if got, doubt := s.Next(c.m, from.Add(time.Duration(i)*time.Second)); got != c.missed || !errors.Is(doubt, c.doubt) {
			t.Errorf("step %d: %s at %d: missed %d (%v), want %d (%v)", i, c.m.Publisher, c.seq, got, doubt, c.missed, c.doubt)
		}
	}
	if s.Publishers() != 4 {
		t.Fatalf("%d publishers followed, want 4", s.Publishers())
	}
	s.Forget(from.Add(time.Hour + 5500*time.Millisecond)) // old was last heard at +5 s, the others after
	if s.Publishers() != 3 {
		t.Fatalf("%d publishers after forgetting, want 3", s.Publishers())
	}
	if got, _ := s.Next(Message{Publisher: "old", Since: old.Since, Seq: 90}, from.Add(time.Hour)); got != 0 {
		t.Fatalf("a publisher forgotten is heard anew: missed %d, want 0", got)
	}
}

// TestForgedNumbersAreDoubtsNotBaselines: whoever may publish can send any
// number under any ID. A number no publisher reaches is a doubt (the
// tiers flush), and the real publisher's next message is one too, after
// which its gaps show again; nothing overflows or counts missed without
// bound.
func TestForgedNumbersAreDoubtsNotBaselines(t *testing.T) {
	from := time.Unix(1000, 0)
	worker := Message{Publisher: "worker", Since: from.Add(-time.Hour)}
	at := func(seq uint64) Message { m := worker; m.Seq = seq; return m }
	for _, forged := range []uint64{math.MaxUint64 - 1, math.MaxUint64, 1 << 40} {
		s := NewSequences(from)
		for i, step := range []struct {
			seq    uint64
			missed uint64
			doubt  error
		}{
			{40, 0, nil},
			{forged, 0, errOrder}, // forged under the worker's ID
			{41, 0, errOrder},     // the real next one: far behind the forged
			{42, 0, nil},
			{44, 1, nil}, // a real gap shows again
			{45, 0, nil},
		} {
			m := at(step.seq)
			if missed, doubt := s.Next(m, from.Add(time.Duration(i)*time.Second)); missed != step.missed || !errors.Is(doubt, step.doubt) {
				t.Errorf("forged %d, step %d (seq %d): missed %d, %v; want %d, %v", forged, i, step.seq, missed, doubt, step.missed, step.doubt)
			}
		}
	}
	// A publisher started after the subscription whose first number is no
	// one's: a doubt, not 2⁶⁴ missed.
	s := NewSequences(from)
	if missed, doubt := s.Next(Message{Publisher: "new", Since: from.Add(time.Minute), Seq: math.MaxUint64}, from); missed != 0 || !errors.Is(doubt, errOrder) {
		t.Fatalf("a new publisher at 2⁶⁴-1: missed %d, %v", missed, doubt)
	}
}

// TestPublishersFollowedAreBoundedInBytes: a flood of forged IDs does not
// grow what a subscriber keeps past maxFollowedBytes; past it every
// publisher is followed afresh, and the tiers flush.
func TestPublishersFollowedAreBoundedInBytes(t *testing.T) {
	from := time.Unix(1000, 0)
	s := NewSequences(from)
	crowded := 0
	for i := range 1_000_000 {
		_, doubt := s.Next(Message{Publisher: fmt.Sprintf("forged-%016d", i), Since: from.Add(-time.Hour), Seq: 1}, from)
		if errors.Is(doubt, ErrCrowded) {
			crowded++
		}
		if s.bytes > maxFollowedBytes {
			t.Fatalf("%d bytes followed after %d publishers", s.bytes, i+1)
		}
	}
	if want := 1_000_000 * (23 + followedOverhead) / maxFollowedBytes; crowded != want {
		t.Fatalf("crowded %d times, want %d", crowded, want)
	}
}

func TestDecodeRefusesALongPublisherID(t *testing.T) {
	m := Message{Publisher: strings.Repeat("p", maxPublisherID+1), Seq: 1}
	if _, err := Decode(m.Encode()); !errors.Is(err, errFormat) {
		t.Fatalf("Decode = %v, want errFormat", err)
	}
}

type sender struct {
	mu   sync.Mutex
	sent []Message
	fail bool
}

func (s *sender) Publish(_ context.Context, channel, payload string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if channel != "ch" {
		return errors.New("wrong channel " + channel)
	}
	if s.fail {
		return errors.New("down")
	}
	m, err := Decode(payload)
	s.sent = append(s.sent, m)
	return err
}

func (s *sender) messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

func TestAFailedMessageKeepsItsNumber(t *testing.T) {
	s := &sender{}
	p := NewPublisher(s, "ch")
	at := time.Now()
	if err := p.Announce(t.Context(), at, []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	s.fail = true
	if err := p.Announce(t.Context(), at, []string{"b"}, nil); err == nil {
		t.Fatal("the failed send was not reported")
	}
	s.fail = false
	if err := p.Heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(s.sent) != 2 || s.sent[0].Seq != 1 || s.sent[1].Seq != 3 || !s.sent[1].Heartbeat() || s.sent[0].Publisher != p.ID() {
		t.Fatalf("sent %+v: want 1 and, after the failed 2, heartbeat 3 from %s", s.sent, p.ID())
	}
	seqs := NewSequences(time.Now().Add(-time.Minute))
	if first, _ := seqs.Next(s.sent[0], time.Now()); first != 0 {
		t.Fatal("the first message heard shows a gap")
	}
	if second, _ := seqs.Next(s.sent[1], time.Now()); second != 1 {
		t.Fatal("a subscriber does not see the failed message missed")
	}
}

// TestAMessageGivenUpBeforeItsTurnIsTold: an announcement whose context
// ends while another is in flight takes no number, and the next message
// says it failed.
func TestAMessageGivenUpBeforeItsTurnIsTold(t *testing.T) {
	s := &sender{}
	p := NewPublisher(s, "ch")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p.turn <- struct{}{} // a message in flight
	if err := p.Announce(ctx, time.Now(), []string{"a"}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Announce = %v", err)
	}
	<-p.turn
	if err := p.Announce(t.Context(), time.Now(), []string{"b"}, nil); err != nil || s.sent[0].Seq != 1 || s.sent[0].Failed != 1 {
		t.Fatalf("sent %+v, %v: want the next message numbered 1, telling one failed", s.sent, err)
	}
}

// TestALossShowsToASubscriberThatNeverHeardThePublisher: a publisher
// running before the subscription, heard for the first time; its previous
// message, numbered while the subscription listened, was missed.
func TestALossShowsToASubscriberThatNeverHeardThePublisher(t *testing.T) {
	from := time.Unix(1000, 0)
	now := from.Add(time.Minute)
	for _, c := range []struct {
		prev   time.Time
		missed uint64
	}{
		{time.Time{}, 0},                // its first message
		{from.Add(-time.Minute), 0},     // before the subscription
		{from.Add(10 * time.Second), 1}, // while it listened: missed
		{now.Add(-2 * time.Hour), 0},    // over an hour ago: past every tier's lifetime
	} {
		s := NewSequences(from)
		m := Message{Publisher: "p", Since: from.Add(-time.Hour), Seq: 41, Prev: c.prev}
		if missed, doubt := s.Next(m, now); missed != c.missed || doubt != nil {
			t.Errorf("prev %v: missed %d, %v; want %d", c.prev, missed, doubt, c.missed)
		}
	}
	// Forgotten after an hour's silence, then heard again.
	s := NewSequences(from)
	s.Next(Message{Publisher: "p", Since: from.Add(-time.Hour), Seq: 40}, from.Add(time.Second))
	s.Forget(from.Add(2 * time.Hour))
	if missed, _ := s.Next(Message{Publisher: "p", Since: from.Add(-time.Hour), Seq: 42, Prev: from.Add(90 * time.Minute)}, from.Add(2*time.Hour)); missed != 1 {
		t.Fatal("a message lost after the publisher was forgotten was not seen")
	}
}

// TestBeatConfirmsThenGoesQuiet: an idle publisher sends nothing; after a
// message, Beat confirms it 1, 2, 4 … 32 s apart, then nothing again.
func TestBeatConfirmsThenGoesQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &sender{}
		p := NewPublisher(s, "ch")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go p.Beat(ctx, time.Second, func(err error) { t.Error(err) })
		time.Sleep(10 * time.Second)
		if sent := s.messages(); len(sent) != 0 {
			t.Fatalf("an idle publisher sent %+v", sent)
		}
		start := time.Now()
		if err := p.Announce(t.Context(), start, []string{"a"}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		sent := s.messages()
		var after []time.Duration
		for _, m := range sent[1:] {
			if !m.Heartbeat() || m.Failed != 0 {
				t.Fatalf("sent %+v", sent)
			}
			after = append(after, m.At.Sub(start).Round(time.Second))
		}
		if want := []time.Duration{1, 3, 7, 15, 31, 63}; !slices.Equal(after, scale(want, time.Second)) {
			t.Fatalf("confirmations at %v after the announcement, want %v s", after, want)
		}
	})
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d * unit
	}
	return out
}

// TestAFailureShowsToASubscriberThatNeverHeardThePublisher: the numbers of
// a publisher running before the subscription cannot show its gap; the
// next message's Failed does.
func TestAFailureShowsToASubscriberThatNeverHeardThePublisher(t *testing.T) {
	s := &sender{}
	p := NewPublisher(s, "ch")
	seqs := NewSequences(time.Now().Add(time.Minute)) // subscribed after the publisher started
	p.Skip()
	s.fail = true
	if err := p.Announce(t.Context(), time.Now(), []string{"a"}, nil); err == nil {
		t.Fatal("the failed send was not reported")
	}
	s.fail = false
	if err := p.Heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if missed, doubt := seqs.Next(s.sent[0], time.Now()); missed != 2 || doubt != nil || s.sent[0].Failed != 2 {
		t.Fatalf("%+v: missed %d, %v; want the two failed", s.sent[0], missed, doubt)
	}
	if err := p.Heartbeat(t.Context()); err != nil || s.sent[1].Failed != 0 {
		t.Fatalf("%+v, %v: want the failures told once", s.sent[1], err)
	}
}
