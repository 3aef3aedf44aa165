package invalidate

import (
	"time"

	"github.com/invalidator-go/invalidator/events"
)

// Record is one input record — an SQS message, an SNS record, a stream
// record — with its decoded changes, or the error that decoding gave.
type Record struct {
	ID      string // message ID or sequence number, reported back on failure
	Changes []events.Change
	Err     error
}

// KeyStatus is what happened to one key.
type KeyStatus uint8

// The outcomes of a key.
const (
	KeyFailed  KeyStatus = iota // not deleted: see the record's error
	KeyDeleted                  // it existed and was deleted
	KeyAbsent                   // it did not exist: nothing to delete
)

func (s KeyStatus) String() string { return [...]string{"failed", "deleted", "absent"}[s] }

// KeyResult is the outcome of one key of a record.
type KeyResult struct {
	Key    string
	Status KeyStatus
}

// TagResult is the outcome of one tag of a record: how many of its entries
// were deleted, or already gone, which, and why it failed, if it did.
type TagResult struct {
	Tag             string
	Deleted, Absent int
	// Entries are the keys of the entries deleted or already gone, for the
	// worker to announce and to delete again: those of a batch's tags up to
	// 8 MiB of keys. Incomplete says some were left out. Records that share
	// a tag share its Entries.
	Entries    []string
	Incomplete bool
	Err        error
}

// Result is the outcome of one record. It succeeded when Err is nil: every
// one of its keys was deleted or already absent, and every entry of its
// tags.
type Result struct {
	Record string
	Keys   []KeyResult
	Tags   []TagResult
	Err    error
	// Transient, beside an Err, says that the record failed for now: some
	// of its keys or of its tags' entries could not be deleted because the
	// cache could not be reached, was in motion, full, busy or throttling,
	// refused a password since rotated, or the deadline came — the closed
	// list of internal/cacheerr. It may pass when tried again, and should
	// be, for as long as it takes. Without it the record failed for good —
	// it cannot be decoded or planned, the cache answered anything else
	// (NOPERM, WRONGTYPE at a tag...), a bug was caught — and retrying
	// cannot help: it belongs in a failure queue, to be replayed once
	// fixed. A record with both kinds of faults is transient: its keys are
	// retried first.
	Transient bool
	// SecondDelete says that every change of the record is a second
	// delete: done again, it schedules none. Failover says they are all the
	// failover schedule's.
	SecondDelete, Failover bool
}

// Metrics count a batch, for the front ends to log and emit.
type Metrics struct {
	Records     int
	Failed      int // records that failed
	Transient   int // of which for now
	KeysDeleted int // distinct keys
	KeysAbsent  int
	KeysFailed  int
	// Distinct tags invalidated, those that failed, and the entries the
	// tags invalidated held.
	TagsInvalidated   int
	TagsFailed        int
	TagEntriesDeleted int
	// MaxLag is the longest time between a change and its invalidation,
	// among the changes of the records that succeeded and say when they
	// happened.
	MaxLag time.Duration
	// Planned is how long decoding and planning the batch took, from the
	// start of Invalidate; the deletes of its first chunks overlap it.
	Planned time.Duration
	// ECPUs are what the batch asked of the cache, by the model of
	// ecpu.go: the commands sent, retries included; Bytes what they and
	// their replies moved, by which the model counts.
	ECPUs, Bytes int64
	// Throttled counts the commands the cache refused above its ECPU
	// limit; each was retried.
	Throttled int64
	// FleetDown says the fleet's budget (Options.Fleet) could not be read
	// when the batch ended: the Invalidator keeps to its fallback share.
	FleetDown bool
}

// Report is the outcome of a batch: one Result per record, in input order.
type Report struct {
	Results []Result
	Metrics Metrics
}
