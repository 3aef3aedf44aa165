package events

import (
	"iter"

	"github.com/invalidator-go/invalidator/internal/jsonstring"
)

// The worker's own change messages, which decodeBody reads back: keys or
// tags to delete again — a second delete, the failover schedule's, the
// failover window's —, {"keys":[...],"secondDelete":true} or "tags", with
// "failover":true for the failover schedule's. Each is written as the
// body of its names (AgainMessages) followed by one of these ends; the
// messages are sized for the longer.
const (
	AgainEnd    = `],"secondDelete":true}`
	FailoverEnd = `],"secondDelete":true,"failover":true}`
)

// maxAgainNames is the most names an again message holds: one UNLINK
// chunk of the invalidator.
const maxAgainNames = 500

// AgainMessage is one chunk of names, keys or tags: its message's body up
// to its end, and the names it holds.
type AgainMessage struct {
	Body  []byte
	Names []string
}

// AgainMessages yields the again messages of names, keys or tags, each of
// at most maxAgainNames names and, with the longer end, limit bytes as
// sent: each name is encoded once, in time linear in the names. A name
// that alone is over limit goes alone, for SQS to refuse: the worker's
// configuration keeps the longest key within it (MaxAgainBytes).
func AgainMessages(names []string, tags bool, limit int) iter.Seq[AgainMessage] {
	return func(yield func(AgainMessage) bool) {
		if len(names) == 0 {
			return
		}
		head := `{"keys":[`
		if tags {
			head = `{"tags":[`
		}
		body, start := []byte(head), 0
		for i, name := range names {
			mark := len(body)
			if i > start {
				body = append(body, ',')
			}
			body = jsonstring.Append(body, name)
			if i > start && (i-start == maxAgainNames || len(body)+len(FailoverEnd) > limit) {
				// name opens the next message.
				next := append([]byte(head), body[mark+1:]...)
				if !yield(AgainMessage{Body: body[:mark], Names: names[start:i]}) {
					return
				}
				body, start = next, i
			}
		}
		yield(AgainMessage{Body: body, Names: names[start:]})
	}
}

// MaxAgainBytes is the most bytes an again message of one name of n bytes
// takes.
func MaxAgainBytes(n int) int { return len(`{"keys":[`) + jsonstring.MaxBytes(n) + len(FailoverEnd) }
