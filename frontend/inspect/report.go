package inspect

import (
	"encoding/json"
	"math"
	"time"
)

// Report is what an inspection found so far.
type Report struct {
	Records     int           `json:"records"`     // read from the sources
	Undecodable int           `json:"undecodable"` // records that did not decode
	Changes     int           `json:"changes"`     // decoded
	Sampled     int           `json:"sampled"`     // of the changes, chosen for checks
	Unplanned   int           `json:"unplanned"`   // sampled changes the rules plan no keys for
	Delays      []DelayReport `json:"delays"`
	// Inconsistent lists the first inconsistent keys found.
	Inconsistent []Finding `json:"inconsistent"`
}

// DelayReport is the consistency of the keys checked at one delay after
// their changes.
type DelayReport struct {
	After                                            time.Duration
	Keys                                             int // checked
	Consistent, Inconsistent, Unverified, Unreadable int
}

// Finding is one key found older than its change.
type Finding struct {
	Key    string        `json:"key"`
	After  time.Duration `json:"-"`
	At     time.Time     `json:"checkedAt"`
	Found  int64         `json:"found"` // the version the key held
	Want   int64         `json:"want"`  // the change's version
	Entity string        `json:"entity"`
	ID     string        `json:"id"`
}

// Share is the share of consistent keys among those whose consistency is
// known (not unverified, not unreadable); 1 when there are none.
func (d DelayReport) Share() float64 {
	n := d.Consistent + d.Inconsistent
	if n == 0 {
		return 1
	}
	return float64(d.Consistent) / float64(n)
}

// Nines is the consistency as a count of nines (99.9% is 3). With no
// inconsistent key, the checks can only show so many: log10 of their
// number, and atLeast is true.
func (d DelayReport) Nines() (nines float64, atLeast bool) {
	n := d.Consistent + d.Inconsistent
	if n == 0 {
		return 0, true
	}
	if d.Inconsistent == 0 {
		return math.Log10(float64(n)), true
	}
	return math.Max(0, -math.Log10(float64(d.Inconsistent)/float64(n))), false // +0 when all are
}

func (d DelayReport) MarshalJSON() ([]byte, error) {
	nines, atLeast := d.Nines()
	return json.Marshal(struct {
		After        string  `json:"after"`
		Keys         int     `json:"keys"`
		Consistent   int     `json:"consistent"`
		Inconsistent int     `json:"inconsistent"`
		Unverified   int     `json:"unverified"`
		Unreadable   int     `json:"unreadable"`
		Share        float64 `json:"share"`
		Nines        float64 `json:"nines"`
		NinesAtLeast bool    `json:"ninesAtLeast"`
	}{d.After.String(), d.Keys, d.Consistent, d.Inconsistent, d.Unverified, d.Unreadable, d.Share(), math.Floor(nines*100) / 100, atLeast})
}

func (f Finding) MarshalJSON() ([]byte, error) {
	type plain Finding
	return json.Marshal(struct {
		plain
		After string `json:"after"`
	}{plain(f), f.After.String()})
}
