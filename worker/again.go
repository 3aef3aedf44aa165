package worker

import "github.com/invalidator-go/invalidator/invalidate"

// A batch deletes again for one of two causes, named the same in the code,
// the batch line and the metrics (their Cause dimension):
const (
	// causeDelayed: a second delete, a change marked secondDelete that a
	// batch scheduled SECOND_DELETE_DELAY earlier through the delay queue
	// (seconddelete.go), for fills that raced the first delete.
	causeDelayed = "delayed"
	// causeFailover: for deletes a failover lost (failover.go) — the
	// failover schedule's, a change marked failover that a batch sent
	// FAILOVER_REDELETE_AFTER earlier through the delay queue, and the
	// window, read and deleted again after a sign of a failover.
	causeFailover = "failover"
)

// again counts what a batch deleted again for one cause: distinct keys and
// tags, and the refills caught — keys there again, and the entries their
// tags held again: filled since, or brought back.
type again struct {
	cause               string
	keys, tags, refills int
	seen                map[string]bool // a key or tag two records share counts once
}

// add counts what res deleted again.
func (a *again) add(res *invalidate.Result) {
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	for _, k := range res.Keys {
		if k.Status == invalidate.KeyFailed || a.seen[k.Key] {
			continue
		}
		a.seen[k.Key] = true
		a.keys++
		if k.Status == invalidate.KeyDeleted {
			a.refills++
		}
	}
	for _, t := range res.Tags {
		if !a.seen["\x00"+t.Tag] {
			a.seen["\x00"+t.Tag] = true
			a.tags++
			a.refills += t.Deleted
		}
	}
}

// scheduledAgain counts the second deletes among the batch's records, and
// the failover schedule's.
func scheduledAgain(rep invalidate.Report) []again {
	delayed, failover := again{cause: causeDelayed}, again{cause: causeFailover}
	for i := range rep.Results {
		switch res := &rep.Results[i]; {
		case res.Failover:
			failover.add(res)
		case res.SecondDelete:
			delayed.add(res)
		}
	}
	return []again{delayed, failover}
}

// figures are the counts as batch-line fields (again_<cause>_...) and
// metrics, which carry the cause as a dimension: none when nothing was
// deleted again.
func (a again) figures() []figure {
	if a.keys+a.tags == 0 {
		return nil
	}
	return []figure{{"again_" + a.cause + "_keys", "KeysDeletedAgain", int64(a.keys)},
		{"again_" + a.cause + "_tags", "", int64(a.tags)}, {"again_" + a.cause + "_refills", "RefillsCaught", int64(a.refills)}}
}
