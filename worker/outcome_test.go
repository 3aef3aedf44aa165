package worker

import (
	"errors"
	"slices"
	"testing"

	"github.com/invalidator-go/invalidator/invalidate"
)

// TestAFateIsTheWorkers: the invalidator's results start the outcome; a
// later step's failure for now overrides one for good, never the other way
// round; each record to retry is named once.
func TestAFateIsTheWorkers(t *testing.T) {
	forGood, forNow := errors.New("for good"), errors.New("for now")
	o := outcomeOf(invalidate.Report{Results: []invalidate.Result{
		{Record: "done"}, {Record: "bad", Err: forGood}, {Record: "down", Err: forNow, Transient: true}, {Record: "done"}, {Record: "late"},
	}})
	if got := []Fate{o.Records[0].Fate, o.Records[1].Fate, o.Records[2].Fate}; !slices.Equal(got, []Fate{Done, Retry, Retry}) {
		t.Fatalf("fates %v, want done, retry until parked, retry", got)
	}
	o.fail(1, forNow, true)   // not announced: for now first
	o.fail(2, forGood, false) // stays for now
	o.fail(3, forNow, true)   // the same record, delivered twice
	o.fail(4, forGood, false)
	for i, want := range []RecordOutcome{
		{ID: "done", Fate: Done},
		{ID: "bad", Fate: Retry, Err: forNow, Transient: true},
		{ID: "down", Fate: Retry, Err: forNow, Transient: true},
		{ID: "done", Fate: Retry, Err: forNow, Transient: true},
		{ID: "late", Fate: Retry, Err: forGood},
	} {
		if o.Records[i] != want {
			t.Errorf("record %d: %+v, want %+v", i, o.Records[i], want)
		}
	}
	if got := o.ToRetry(); !slices.Equal(got, []string{"bad", "down", "done", "late"}) {
		t.Errorf("to retry %v, want each once, in order", got)
	}
	if m := o.metrics(); m.Failed != 5-1 || m.Transient != 3 {
		t.Errorf("metrics: %d failed, %d for now; want 4 and 3", m.Failed, m.Transient)
	}
}
