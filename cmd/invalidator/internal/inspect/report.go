package inspect

import (
	"encoding/json"
	"math"
	"time"
)

// Report is what an inspection found so far.
type Report struct {
	Records     int `json:"records"`     // read from the sources
	Undecodable int `json:"undecodable"` // records that did not decode
	Changes     int `json:"changes"`     // decoded, each once
	// Duplicates counts the deliveries of a change already read (the same
	// entity, id, version and op): SNS and SQS deliver at least once, and
	// a publish the SDK retried is sent twice. They are not checked again.
	Duplicates int `json:"duplicates"`
	Sampled    int `json:"sampled"`   // of the changes, chosen for checks
	Unplanned  int `json:"unplanned"` // sampled changes the rules plan no keys for
	// ReadErrors counts the failed reads of the sources, retried; the
	// last one says why.
	ReadErrors    int           `json:"readErrors"`
	LastReadError string        `json:"lastReadError,omitempty"`
	Delays        []DelayReport `json:"delays"`
	// Inconsistent lists the first inconsistent keys found at each delay.
	Inconsistent []Finding `json:"inconsistent"`
	// Local is what the local tier did, when the keys were read through one.
	Local *NearReport `json:"local,omitempty"`
}

// DelayReport is the consistency of the keys checked at one delay after
// their changes.
type DelayReport struct {
	After                                            time.Duration
	Keys                                             int // checked
	Consistent, Inconsistent, Unverified, Unreadable int
	// Absent counts the consistent keys that held nothing: they show the
	// invalidation done, but not that what is cached is fresh.
	Absent int
	// Late counts the keys checked later than Options.Late after they
	// fell due: the inspector or the cache was behind.
	Late int
	// Tags counts the tags checked; the entries each held are counted
	// among the keys.
	Tags int

	findings int // listed in Report.Inconsistent
}

// Finding is one key found older than its change: its version older than
// the change's, or, held by a tag of the change, its value filled before.
type Finding struct {
	Key    string        `json:"key"`
	Tag    string        `json:"tag,omitempty"` // the key of the tag that holds it
	After  time.Duration `json:"-"`
	At     time.Time     `json:"checkedAt"`
	Found  int64         `json:"found"` // the version the key held
	Want   int64         `json:"want"`  // the change's version
	Entity string        `json:"entity"`
	ID     string        `json:"id"`
}

// Compared counts the keys whose consistency is known: neither unverified
// nor unreadable.
func (d DelayReport) Compared() int { return d.Consistent + d.Inconsistent }

// Share is the share of consistent keys among those compared; NaN when
// none was.
func (d DelayReport) Share() float64 {
	if d.Compared() == 0 {
		return math.NaN()
	}
	return float64(d.Consistent) / float64(d.Compared())
}

// Nines is the consistency as a count of nines (99.9% is 3). With no
// inconsistent key, the checks can only show so many: log10 of their
// number, and atLeast is true. NaN when no key was compared.
func (d DelayReport) Nines() (nines float64, atLeast bool) {
	n := d.Compared()
	switch {
	case n == 0:
		return math.NaN(), false
	case d.Inconsistent == 0:
		return exact(math.Log10(float64(n))), true
	default:
		return exact(math.Max(0, -math.Log10(float64(d.Inconsistent)/float64(n)))), false // +0 when all are
	}
}

// exact rounds away the last bits of a logarithm, so that 10,000 checks
// show 4 nines, not 3.9999999999999996.
func exact(x float64) float64 { return math.Round(x*1e9) / 1e9 }

func (d DelayReport) MarshalJSON() ([]byte, error) {
	nines, atLeast := d.Nines()
	var share, n *float64
	if d.Compared() > 0 {
		s, f := d.Share(), math.Floor(nines*100)/100
		share, n = &s, &f
	}
	return json.Marshal(struct {
		After        string   `json:"after"`
		Keys         int      `json:"keys"`
		Consistent   int      `json:"consistent"`
		Inconsistent int      `json:"inconsistent"`
		Unverified   int      `json:"unverified"`
		Unreadable   int      `json:"unreadable"`
		Absent       int      `json:"absent"`
		Late         int      `json:"late"`
		Tags         int      `json:"tags"`
		Share        *float64 `json:"share"` // null when no key was compared
		Nines        *float64 `json:"nines"`
		NinesAtLeast bool     `json:"ninesAtLeast"`
	}{d.After.String(), d.Keys, d.Consistent, d.Inconsistent, d.Unverified, d.Unreadable, d.Absent, d.Late, d.Tags, share, n, atLeast})
}

func (f Finding) MarshalJSON() ([]byte, error) {
	type plain Finding
	return json.Marshal(struct {
		plain
		After string `json:"after"`
	}{plain(f), f.After.String()})
}
