package writethrough

import "github.com/invalidator-go/invalidator/internal/tagset"

// Stored describes what a key holds, as an observer outside the service
// sees it: a consistency checker compares Version with the version of the
// latest change, and a tagged value's TagClock with its registrations.
type Stored struct {
	// Lease is true while a loader holds the key: it holds no value, and the
	// fill that ends the lease succeeds only if no invalidation came first.
	Lease bool
	// NotFound is true for a cached "not found".
	NotFound bool
	// Version is the value's version, as Options.VersionOf gave it; 0 when
	// the cache has no VersionOf.
	Version int64
	// Tags are a tagged value's tags (Options.TagsOf), and TagClock the tag
	// clock's reading before its load, in microseconds — the clock of its
	// registration in each tag, which a reader finds there or does not
	// serve the value. Both empty for a value without tags.
	Tags     []string
	TagClock int64
}

// Describe reads the header of an entry as the cache stores it; ok is false
// when raw is not a writethrough entry.
func Describe(raw []byte) (s Stored, ok bool) {
	e, err := decodeEntry(raw)
	if err != nil {
		return Stored{}, false
	}
	s = Stored{Lease: e.kind == kindLease, NotFound: e.kind == kindNotFound, Version: e.version, Tags: e.tags}
	s.TagClock, _ = tagset.ClockOf(e.reg)
	return s, true
}
