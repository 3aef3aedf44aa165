package announce

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Message is one announcement: the keys (and tags) a publisher deleted, or
// none: a heartbeat.
type Message struct {
	// Publisher identifies the process that sent it, for its lifetime.
	Publisher string
	// Since is when the publisher started, to the millisecond: a
	// subscriber that was there before may expect its messages from the
	// first.
	Since time.Time
	// Seq numbers the publisher's messages from 1, heartbeats included.
	Seq uint64
	// Prev is when the publisher numbered its previous message, sent or
	// not, to the microsecond; zero for its first. A subscriber that never
	// heard the publisher, but listened then, missed it.
	Prev time.Time
	// At is when the deletes were sent, to the microsecond, or the
	// heartbeat: what the source held before then, a load after the
	// message finds in the cache or newer.
	At time.Time
	// Keys are the keys deleted.
	Keys []string
	// Tags are the tags invalidated, whose keys a subscriber cannot list:
	// it forgets everything it holds.
	Tags []string
	// Failed counts the publisher's messages before this one that it could
	// not send, since its last one sent: every subscriber forgets what it
	// holds, even one that never heard the publisher before.
	Failed uint64
}

// Heartbeat tells a message without keys or tags.
func (m Message) Heartbeat() bool { return len(m.Keys) == 0 && len(m.Tags) == 0 }

// version is the format's: a subscriber drops what a later one may mean.
const version = 1

// wire is a message as JSON: {"v":1,"pub":"…","since":<unix ms>,"seq":N,
// "prev":<unix µs>,"at":<unix µs>,"keys":[…],"tags":[…],"failed":N}, prev,
// keys, tags and failed left out when empty.
type wire struct {
	V      int      `json:"v"`
	Pub    string   `json:"pub"`
	Since  int64    `json:"since"`
	Seq    uint64   `json:"seq"`
	Prev   int64    `json:"prev,omitempty"`
	At     int64    `json:"at"`
	Keys   []string `json:"keys,omitempty"`
	Tags   []string `json:"tags,omitempty"`
	Failed uint64   `json:"failed,omitempty"`
}

// Encode returns the message as it is published.
func (m Message) Encode() string {
	b, _ := json.Marshal(wire{V: version, Pub: m.Publisher, Since: m.Since.UnixMilli(), Seq: m.Seq, Prev: micros(m.Prev), At: m.At.UnixMicro(), Keys: m.Keys, Tags: m.Tags, Failed: m.Failed})
	return string(b)
}

// maxPublisherID bounds a publisher's ID, which subscribers keep; a
// Publisher's has 16 bytes.
const maxPublisherID = 64

// errFormat is Decode's error for a payload that is not a message this
// version reads.
var errFormat = errors.New("announce: not an announcement of format 1")

// Decode reads a published message.
func Decode(payload string) (Message, error) {
	var w wire
	if err := json.Unmarshal([]byte(payload), &w); err != nil {
		return Message{}, fmt.Errorf("%w: %w", errFormat, err)
	}
	if w.V != version || w.Pub == "" || len(w.Pub) > maxPublisherID || w.Seq == 0 {
		return Message{}, fmt.Errorf("%w: version %d, publisher %q, sequence %d", errFormat, w.V, w.Pub, w.Seq)
	}
	return Message{Publisher: w.Pub, Since: time.UnixMilli(w.Since), Seq: w.Seq, Prev: fromMicros(w.Prev), At: time.UnixMicro(w.At), Keys: w.Keys, Tags: w.Tags, Failed: w.Failed}, nil
}

// micros and fromMicros carry a time that may be zero: 0 on the wire.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}
