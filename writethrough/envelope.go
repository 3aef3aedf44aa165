package writethrough

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// An entry is stored as "wt1|<kind>|<stamp>|<version>|<delta µs>|<expiry ms>|<payload>":
// kind v (value), n (not found) or l (a loader's lease, with only a stamp);
// t, a value that depends on tags, has its registration and its tags
// before the payload: "…|<expiry ms>|<registration>|<count>|<len>:<tag>…|<payload>".
// The stamp identifies one write, for the compare-and-set scripts; Lua reads
// the header with string.match.
const magic = "wt1|"

type kind byte

const (
	kindValue    kind = 'v'
	kindNotFound kind = 'n'
	kindLease    kind = 'l'
	kindTagged   kind = 't'
)

type entry struct {
	kind    kind
	stamp   string
	version int64
	delta   time.Duration // how long the value took to compute
	expiry  time.Time     // logical expiry, for XFetch
	payload []byte
	// A tagged value's: its registration in each of its tags
	// (tagset.Registration), which a hit finds there unless a tag was
	// invalidated or lost since.
	reg  string
	tags []string
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
		if e.kind == kindTagged {
			b.WriteString(e.reg)
			b.WriteByte('|')
			b.WriteString(strconv.Itoa(len(e.tags)))
			b.WriteByte('|')
			for _, t := range e.tags {
				b.WriteString(strconv.Itoa(len(t)))
				b.WriteByte(':')
				b.WriteString(t)
			}
			b.WriteByte('|')
		}
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
	// Not copied: raw is a reply's bytes, which nothing writes (valkey-go's
	// AsBytes is a view of its string), and a stamp is read on every hit.
	e.stamp = unsafe.String(unsafe.SliceData(stamp), len(stamp))
	switch e.kind {
	case kindLease:
		if !ok || len(rest) != 0 {
			return entry{}, errEnvelope
		}
		return e, nil
	case kindValue, kindNotFound, kindTagged:
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
	if e.kind == kindTagged {
		var err error
		if rest, err = e.decodeTags(rest); err != nil {
			return entry{}, err
		}
	}
	e.payload = rest
	return e, nil
}

// decodeTags reads a tagged value's registration and tags from the front
// of rest, and returns what follows them.
func (e *entry) decodeTags(rest []byte) ([]byte, error) {
	reg, rest, ok := bytes.Cut(rest, []byte{'|'})
	count, rest, ok2 := bytes.Cut(rest, []byte{'|'})
	n, err := strconv.Atoi(string(count))
	if !ok || !ok2 || err != nil || n < 1 || n > len(rest) {
		return nil, errEnvelope
	}
	e.reg, e.tags = string(reg), make([]string, n)
	for i := range e.tags {
		size, after, ok := bytes.Cut(rest, []byte{':'})
		l, err := strconv.Atoi(string(size))
		if !ok || err != nil || l < 1 || l > len(after) {
			return nil, errEnvelope
		}
		e.tags[i], rest = string(after[:l]), after[l:]
	}
	rest, ok = bytes.CutPrefix(rest, []byte{'|'})
	if !ok {
		return nil, errEnvelope
	}
	return rest, nil
}
