package announce

import "time"

// Sequences follow each publisher's numbers on one subscription, to tell
// the messages missed. Not safe for concurrent use.
type Sequences struct {
	from time.Time // when the subscription was confirmed
	last map[string]heard
}

type heard struct {
	seq uint64
	at  time.Time
}

// skew is how far apart the clocks of a publisher and a subscriber may be:
// a publisher that started within it of the subscription may have sent
// its first messages before it.
const skew = time.Second

// NewSequences follows the publishers heard on a subscription confirmed at
// from.
func NewSequences(from time.Time) *Sequences {
	return &Sequences{from: from, last: map[string]heard{}}
}

// Next notes m, heard at now, and returns how many messages of its
// publisher were missed before it. A publisher heard for the first time
// that started after the subscription should be at its first message; one
// that started before may have sent what came before it to nobody here.
func (s *Sequences) Next(m Message, now time.Time) (missed uint64) {
	h, known := s.last[m.Publisher]
	switch {
	case known && m.Seq > h.seq+1:
		missed = m.Seq - h.seq - 1
	case !known && m.Since.After(s.from.Add(skew)) && m.Seq > 1:
		missed = m.Seq - 1
	}
	if m.Seq > h.seq {
		h.seq = m.Seq
	}
	h.at = now
	s.last[m.Publisher] = h
	return missed
}

// Forget drops the publishers not heard since before: processes gone.
// One heard again after that counts as heard for the first time.
func (s *Sequences) Forget(before time.Time) {
	for id, h := range s.last {
		if h.at.Before(before) {
			delete(s.last, id)
		}
	}
}

// Publishers is how many publishers are followed.
func (s *Sequences) Publishers() int { return len(s.last) }
