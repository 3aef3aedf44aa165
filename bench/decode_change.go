package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/invalidator-go/invalidator/events"
)

// What a library decoder leaves to plain Go: the rules of a change message
// (events/body.go, fields.go) applied to the values a library decoded, so
// that each library's decoder yields the events.Change values the
// product's does, and refuses what it refuses. Error texts differ; which
// records fail does not, on what the decode group checks.

var errLib = errors.New("invalid change event")

func libInvalid(reason string) error { return errors.New(errLib.Error() + ": " + reason) }

// libChange is a change message's members as a library decoded them; the
// envelope members sit beside them, as collect gathers both in one pass.
// id is a string or an integer literal, kept as the library gives it.
type libChange struct {
	Entity       *string
	ID           string
	IDKind       byte // 0 absent, 's' string, 'n' number
	Op           *string
	Version      *int64
	Keys, Tags   []string
	HasKeys      bool
	HasTags      bool
	OccurredAt   *string
	SecondDelete *bool
}

// change interprets a change message as events' fields.change does.
func (f *libChange) change(source events.Source, at time.Time) (events.Change, error) {
	c := events.Change{Source: source, OccurredAt: at}
	if f.Entity == nil && !f.HasKeys && !f.HasTags {
		return c, libInvalid("a change needs an entity, keys or tags")
	}
	if f.Entity != nil {
		if err := checkText("entity", *f.Entity); err != nil {
			return c, err
		}
		c.Entity = *f.Entity
	}
	switch f.IDKind {
	case 's':
		if err := checkText("id", f.ID); err != nil {
			return c, err
		}
		c.ID = f.ID
	case 'n':
		// An integer literal's text, however large; a fraction or an
		// exponent is refused, as idText does.
		if strings.ContainsAny(f.ID, ".eE") {
			return c, libInvalid("a numeric id must be an integer")
		}
		c.ID = f.ID
	}
	if f.Op != nil {
		switch op := events.Op(*f.Op); op {
		case events.OpCreate, events.OpUpdate, events.OpDelete:
			c.Op = op
		default:
			return c, libInvalid("op must be create, update or delete")
		}
	}
	if f.Version != nil {
		c.Version, c.HasVersion = *f.Version, true
	}
	var err error
	if f.HasKeys {
		if c.Keys, err = checkStrings("keys", f.Keys, 10_000); err != nil {
			return c, err
		}
	}
	if f.HasTags {
		if c.Tags, err = checkStrings("tags", f.Tags, 1_000); err != nil {
			return c, err
		}
	}
	if f.OccurredAt != nil {
		if c.OccurredAt, err = time.Parse(time.RFC3339Nano, *f.OccurredAt); err != nil {
			return c, libInvalid("occurredAt is not RFC 3339")
		}
	}
	if f.SecondDelete != nil {
		c.SecondDelete = *f.SecondDelete
		if c.SecondDelete && len(c.Keys) == 0 && len(c.Tags) == 0 {
			return c, libInvalid("a second delete needs keys or tags")
		}
	}
	if c.Entity == "" && len(c.Keys) == 0 && len(c.Tags) == 0 {
		return c, libInvalid("a change needs an entity, keys or tags")
	}
	return c, nil
}

func checkText(field, s string) error {
	switch {
	case s == "":
		return libInvalid(field + " is empty")
	case strings.ContainsRune(s, utf8.RuneError):
		return libInvalid(field + " holds invalid UTF-8 or an unpaired surrogate")
	}
	return nil
}

func checkStrings(field string, ss []string, max int) ([]string, error) {
	switch {
	case len(ss) == 0:
		return nil, libInvalid(field + " is empty")
	case len(ss) > max:
		return nil, libInvalid("too many " + field)
	}
	for _, s := range ss {
		if err := checkText(field, s); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

// libEnvelope is what a body tells besides its change: which envelope, if
// any, and its time.
type libEnvelope struct {
	Type, Message, Timestamp *string
	MessageBad               bool // a Message that is no string
	DetailType               bool // "detail-type" present
	Detail                   []byte
	Time                     *string
}

// envelopeKind says what decodeObject would take a body object for.
func (e *libEnvelope) kind() byte {
	switch {
	case e.Type != nil && e.Message != nil:
		return 's' // SNS
	case e.DetailType && e.Detail != nil:
		return 'e' // EventBridge
	}
	return 'c' // a change message
}

// snsAt checks an SNS envelope and returns its time, as
// decodeSNSEnvelope does.
func (e *libEnvelope) snsAt() (time.Time, error) {
	if *e.Type != "Notification" {
		return time.Time{}, libInvalid("an SNS envelope must have Type Notification")
	}
	if e.MessageBad {
		return time.Time{}, libInvalid("the SNS Message must be a string")
	}
	return envelopeTime(e.Timestamp)
}

func envelopeTime(s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return t, libInvalid("bad envelope time")
	}
	return t, nil
}

// sentAt reads SQS's SentTimestamp as events does: zero when malformed.
func sentAt(ms string) time.Time {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// dated gives the changes without a time of their own the queue's.
func dated(changes []events.Change, sent time.Time) []events.Change {
	for i := range changes {
		if changes[i].OccurredAt.IsZero() {
			changes[i].OccurredAt = sent
		}
	}
	return changes
}

// epochTime reads ApproximateCreationDateTime as events does.
func epochTime(v float64) time.Time {
	const maxSeconds = 1e11
	for range 2 {
		if v > maxSeconds {
			v /= 1000
		}
	}
	if !(v > 0 && v <= maxSeconds) {
		return time.Time{}
	}
	secs := math.Floor(v)
	return time.Unix(int64(secs), int64((v-secs)*1e9))
}

// sqsResult is one SQS record decoded: its message ID and changes.
type sqsResult struct {
	ID      string
	Changes []events.Change
	Err     error
}
