package writethrough

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"
)

// An entry is stored as "wt1|<kind>|<stamp>|<version>|<delta µs>|<expiry ms>|<payload>":
// kind v (value), n (not found) or l (a loader's lease, with only a stamp).
// The stamp identifies one write, for the compare-and-set scripts; Lua reads
// the header with string.match.
const magic = "wt1|"

type kind byte

const (
	kindValue    kind = 'v'
	kindNotFound kind = 'n'
	kindLease    kind = 'l'
)

type entry struct {
	kind    kind
	stamp   string
	version int64
	delta   time.Duration // how long the value took to compute
	expiry  time.Time     // logical expiry, for XFetch
	payload []byte
}

var errEnvelope = errors.New("not a writethrough entry")

func (e entry) encode() string {
	var b strings.Builder
	b.Grow(len(magic) + 48 + len(e.payload))
	b.WriteString(magic)
	b.WriteByte(byte(e.kind))
	b.WriteByte('|')
	b.WriteString(e.stamp)
	b.WriteByte('|')
	if e.kind != kindLease {
		b.WriteString(strconv.FormatInt(e.version, 10))
		b.WriteByte('|')
		b.WriteString(strconv.FormatInt(e.delta.Microseconds(), 10))
		b.WriteByte('|')
		b.WriteString(strconv.FormatInt(e.expiry.UnixMilli(), 10))
		b.WriteByte('|')
		b.Write(e.payload)
	}
	return b.String()
}

func decodeEntry(raw []byte) (entry, error) {
	rest, ok := bytes.CutPrefix(raw, []byte(magic))
	if !ok || len(rest) < 2 || rest[1] != '|' {
		return entry{}, errEnvelope
	}
	e := entry{kind: kind(rest[0])}
	rest = rest[2:]
	field := func() ([]byte, bool) {
		f, r, ok := bytes.Cut(rest, []byte{'|'})
		rest = r
		return f, ok
	}
	stamp, ok := field()
	e.stamp = string(stamp)
	switch e.kind {
	case kindLease:
		if !ok || len(rest) != 0 {
			return entry{}, errEnvelope
		}
		return e, nil
	case kindValue, kindNotFound:
	default:
		return entry{}, errEnvelope
	}
	var nums [3]int64
	for i := range nums {
		f, ok := field()
		n, err := strconv.ParseInt(string(f), 10, 64)
		if !ok || err != nil {
			return entry{}, errEnvelope
		}
		nums[i] = n
	}
	e.version, e.delta, e.expiry = nums[0], time.Duration(nums[1])*time.Microsecond, time.UnixMilli(nums[2])
	e.payload = rest
	return e, nil
}
