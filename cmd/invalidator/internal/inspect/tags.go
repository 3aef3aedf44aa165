package inspect

import (
	"context"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/writethrough"
)

// tagged is an entry a tag of a change holds, as a check read it.
type tagged struct {
	key, tag string
	read     Read
	verdict  Verdict
}

// tagChecks reads each of the tags of c and the entries it holds, up to
// TagEntries of each, and judges those entries. A tag that cannot be read
// counts as one unreadable key.
func (in *Inspector) tagChecks(ctx context.Context, c check) (out []tagged) {
	for _, tag := range c.tags {
		t, err := in.cache.Tag(ctx, tag, in.opts.TagEntries)
		if err != nil {
			out = append(out, tagged{key: tag, tag: tag, read: Read{Err: err}, verdict: Unreadable})
			continue
		}
		members := make([]string, len(t.Members))
		for i, m := range t.Members {
			members[i] = m.Key
		}
		for i, r := range in.cache.Get(ctx, members) {
			e := tagged{key: members[i], tag: tag, read: r, verdict: Unreadable}
			if r.Err == nil {
				e.verdict = judgeTagged(r.Value, r.Present, t.Members[i].Registration, c.at)
			}
			out = append(out, e)
		}
	}
	return out
}

// judgeTagged judges an entry a tag holds, registration its registration
// there, after a change at at: inconsistent when it holds the value that
// registration is of — a writethrough reader serves it — and that value's
// fill read the tag clock (the cache's time, in microseconds) before the
// change. Absent, a lease, or a value of another fill — not served, its
// registration gone — are consistent. A change that says not when it
// happened leaves the value unverified. The change's time is its
// producer's clock, the fill's the cache's: they may disagree by their
// skew.
func judgeTagged(raw []byte, present bool, registration string, at time.Time) Verdict {
	s, ok := writethrough.Describe(raw)
	clock, registered := tagset.ClockOf(registration)
	switch {
	case !present || !ok || s.Lease || !registered || s.TagClock != clock:
		return Consistent
	case at.IsZero(): // no time to compare the fill's with
		return Unverified
	case clock >= at.UnixMicro():
		return Consistent
	}
	return Inconsistent
}

// tagsOf plans the keys of the tags a change invalidates.
func tagsOf(rules *invalidate.Rules, c *events.Change) []string {
	tags, _ := rules.Tags(c, nil) // those planned beside a failure are invalidated all the same
	for i, t := range tags {
		tags[i] = rules.TagKey(t)
	}
	return tags
}
