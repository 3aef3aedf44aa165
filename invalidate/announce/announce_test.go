package announce

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestMessageRoundTrip(t *testing.T) {
	at := time.UnixMicro(1_800_000_000_123_456)
	m := Message{Publisher: "p1", Since: time.UnixMilli(1_799_999_000_000), Seq: 7, At: at, Keys: []string{"cache:product:1", `odd"key`}, Tags: []string{"t"}}
	got, err := Decode(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.Publisher != m.Publisher || !got.Since.Equal(m.Since) || got.Seq != 7 || !got.At.Equal(at) || !slices.Equal(got.Keys, m.Keys) || !slices.Equal(got.Tags, m.Tags) {
		t.Fatalf("got %+v, want %+v", got, m)
	}
	if got.Heartbeat() || !(Message{Publisher: "p", Seq: 1}).Heartbeat() {
		t.Fatal("a message with keys is no heartbeat; one without is")
	}
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
	}{
		{old, 40, 0},  // started before: its earlier messages went to nobody here
		{old, 41, 0},  // the next one
		{old, 41, 0},  // sent twice
		{old, 44, 2},  // 42 and 43 lost
		{old, 43, 0},  // late, counted missed already
		{young, 1, 0}, // started after: its first
		{young, 3, 1}, // 2 lost
		{Message{Publisher: "late", Since: from.Add(time.Minute)}, 2, 1}, // its first was lost
		{Message{Publisher: "close", Since: from.Add(skew / 2)}, 5, 0},   // within the clocks' skew: may have come before
	} {
		c.m.Seq = c.seq
		if got := s.Next(c.m, from.Add(time.Duration(i)*time.Second)); got != c.missed {
			t.Errorf("step %d: %s at %d: missed %d, want %d", i, c.m.Publisher, c.seq, got, c.missed)
		}
	}
	if s.Publishers() != 4 {
		t.Fatalf("%d publishers followed, want 4", s.Publishers())
	}
	s.Forget(from.Add(5 * time.Second)) // old was last heard at +4 s
	if s.Publishers() != 3 {
		t.Fatalf("%d publishers after forgetting, want 3", s.Publishers())
	}
	if got := s.Next(Message{Publisher: "old", Since: old.Since, Seq: 90}, from.Add(time.Hour)); got != 0 {
		t.Fatalf("a publisher forgotten is heard anew: missed %d, want 0", got)
	}
}

type sender struct {
	sent []Message
	fail bool
}

func (s *sender) Publish(_ context.Context, channel, payload string) error {
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
	if seqs.Next(s.sent[0], time.Now()) != 0 || seqs.Next(s.sent[1], time.Now()) != 1 {
		t.Fatal("a subscriber does not see the failed message missed")
	}
}

func TestAMessageThatWaitedTooLongTakesNoNumber(t *testing.T) {
	s := &sender{}
	p := NewPublisher(s, "ch")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Announce(ctx, time.Now(), []string{"a"}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Announce = %v", err)
	}
	if err := p.Announce(t.Context(), time.Now(), []string{"b"}, nil); err != nil || s.sent[0].Seq != 1 {
		t.Fatalf("sent %+v, %v: want the next message numbered 1, no gap", s.sent, err)
	}
}
