package inspect

import (
	"time"

	"github.com/invalidator-go/invalidator/events"
)

// identity names one change: a change with a version is the same change
// however many times it is delivered.
type identity struct {
	entity, id string
	version    int64
	op         events.Op
}

// seen remembers the changes read within its horizon, the longest delay
// and then some: a duplicate later than that finds its first copy's checks
// done, and is checked as a change of its own.
type seen struct {
	horizon time.Duration
	at      map[identity]time.Time
	order   []identity // oldest first, for forgetting in order
}

// add reports whether c is new, and remembers it.
func (s *seen) add(now time.Time, c identity) bool {
	if s.at == nil {
		s.at = make(map[identity]time.Time)
	}
	for len(s.order) > 0 && now.Sub(s.at[s.order[0]]) > s.horizon {
		delete(s.at, s.order[0])
		s.order = s.order[1:]
	}
	if _, ok := s.at[c]; ok {
		return false
	}
	s.at[c] = now
	s.order = append(s.order, c)
	return true
}
