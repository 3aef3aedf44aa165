package announce

import (
	"errors"
	"time"
)

// Sequences follow each publisher's numbers on one subscription, to tell
// the messages missed. A message's numbers are not trusted: whoever may
// publish on the channel can send any, so a number that cannot be a
// publisher's next one is a doubt, never a new baseline that hides gaps.
// Not safe for concurrent use.
type Sequences struct {
	from  time.Time // when the subscription was confirmed, or the publishers were last forgotten at once
	last  map[string]heard
	bytes int // what last holds, by maxFollowedBytes' measure
}

type heard struct {
	seq uint64
	at  time.Time
}

const (
	// skew is how far apart the clocks of a publisher and a subscriber may
	// be: a publisher that started within it of the subscription may have
	// sent its first messages before it.
	skew = time.Second
	// maxJump is the most messages a publisher can have missed between two
	// heard on a live subscription; further is no publisher's jump.
	maxJump = 1 << 20
	// maxFollowedBytes bounds the publishers followed, each counted as its
	// ID and followedOverhead: some 40,000 processes of a fleet, where a
	// flood of forged IDs would take memory without end.
	maxFollowedBytes = 4 << 20
	followedOverhead = 64
)

// ForgetAfter is how long a publisher may be silent before it is
// forgotten: a process gone. Its next message, should it come, shows a
// loss within it only, so a tier keeps nothing longer.
const ForgetAfter = time.Hour

// The doubts Next reports: the tiers cannot vouch for what they hold.
var (
	// errOrder: a publisher's number jumped further than any publisher's
	// can, or did not go forward — a message sent twice, a forged one, or
	// the real one after a forged one.
	errOrder = errors.New("announce: a publisher's number is out of order")
	// ErrCrowded: more publishers than maxFollowedBytes; they are all
	// followed afresh from this message on.
	ErrCrowded = errors.New("announce: too many publishers to follow")
)

// NewSequences follows the publishers heard on a subscription confirmed at
// from.
func NewSequences(from time.Time) *Sequences {
	return &Sequences{from: from, last: map[string]heard{}}
}

// Next notes m, heard at now, and returns how many messages of its
// publisher were missed before it (its numbers' gap, or what it says it
// failed to send), or a doubt (errOrder, ErrCrowded). A
// publisher heard for the first time that started after the subscription
// should be at its first message; one that started before may have sent
// what came before it to nobody here.
func (s *Sequences) Next(m Message, now time.Time) (missed uint64, doubt error) {
	h, known := s.last[m.Publisher]
	switch {
	case !known:
		if s.bytes+len(m.Publisher)+followedOverhead > maxFollowedBytes {
			clear(s.last)
			s.from, s.bytes, doubt = now, 0, ErrCrowded
		}
		s.bytes += len(m.Publisher) + followedOverhead
		listening := s.from.Add(skew)
		switch {
		case m.Since.After(listening) && m.Seq > 1:
			missed = m.Seq - 1 // started while this subscription listened
		case m.Prev.After(listening) && now.Sub(m.Prev) < ForgetAfter:
			missed = 1 // its last message came while this one listened
		}
	case m.Seq > h.seq:
		missed = m.Seq - h.seq - 1
	default:
		// Not after the last: sent twice (through another node after a
		// timeout), or either is forged. Taken as the new last, so that a
		// forged number followed by the real one still shows its gaps.
		doubt = errOrder
	}
	if missed > maxJump {
		missed, doubt = 0, errOrder
	}
	s.last[m.Publisher] = heard{seq: m.Seq, at: now}
	// What it says it failed to send shows even where its numbers cannot:
	// to a subscriber that never heard it before.
	return max(missed, min(m.Failed, maxJump)), doubt
}

// Forget drops the publishers silent for an hour at now: processes gone.
// One heard again after that counts as heard for the first time.
func (s *Sequences) Forget(now time.Time) {
	for id, h := range s.last {
		if now.Sub(h.at) >= ForgetAfter {
			delete(s.last, id)
			s.bytes -= len(id) + followedOverhead
		}
	}
}

// Publishers is how many publishers are followed.
func (s *Sequences) Publishers() int { return len(s.last) }
