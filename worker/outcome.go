package worker

import "github.com/invalidator-go/invalidator/invalidate"

// Fate is what becomes of a record once its batch is handled. The worker
// alone decides it: a record whose keys the invalidator deleted may still
// fail for now (its announcement or its second delete not sent), and one
// that failed for good is parked, or goes back to its source when it
// cannot be.
type Fate uint8

// The fates of a record.
const (
	Done   Fate = iota // its keys and tags' entries deleted or absent, announced, scheduled again
	Retry              // back to its source: failed for now, or for good and not parked
	Parked             // failed for good, in the failure queue with its reason
)

func (f Fate) String() string { return [...]string{"done", "retry", "parked"}[f] }

// Outcome is a handled batch: what the invalidator did to its keys and
// tags, and what became of each of its records, in input order.
type Outcome struct {
	Report  invalidate.Report
	Records []RecordOutcome
}

// RecordOutcome is what became of one record: its fate and, when it
// failed, why — for now (Transient) or for good.
type RecordOutcome struct {
	ID        string
	Fate      Fate
	Err       error
	Transient bool
}

// outcomeOf is the outcome of a batch as the invalidator left it: a
// record that failed is retried until the worker parks it.
func outcomeOf(rep invalidate.Report) Outcome {
	o := Outcome{Report: rep, Records: make([]RecordOutcome, len(rep.Results))}
	for i, res := range rep.Results {
		o.Records[i] = RecordOutcome{ID: res.Record, Err: res.Err, Transient: res.Transient}
		if res.Err != nil {
			o.Records[i].Fate = Retry
		}
	}
	return o
}

// fail fails record i with err, unless it failed already for a reason
// that decides its fate as well: one for now stays first.
func (o *Outcome) fail(i int, err error, transient bool) {
	r := &o.Records[i]
	if r.Err != nil && (r.Transient || !transient) {
		return
	}
	r.Err, r.Fate = err, Retry
	r.Transient = r.Transient || transient
}

// ToRetry returns the IDs of the records to retry, each once, in input
// order: a record two deliveries share fails once, and Lambda may refuse
// an answer that names one twice.
func (o *Outcome) ToRetry() []string {
	var ids []string
	named := map[string]bool{}
	for _, r := range o.Records {
		if r.Fate == Retry && !named[r.ID] {
			named[r.ID] = true
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// metrics are the report's metrics, with the records that failed as the
// worker decided.
func (o *Outcome) metrics() invalidate.Metrics {
	m := o.Report.Metrics
	m.Failed, m.Transient = 0, 0
	for _, r := range o.Records {
		if r.Err != nil {
			m.Failed++
		}
		if r.Transient {
			m.Transient++
		}
	}
	return m
}
