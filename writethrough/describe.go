package writethrough

// Stored describes what a key holds, as an observer outside the service
// sees it: a consistency checker compares Version with the version of the
// latest change.
type Stored struct {
	// Lease is true while a loader holds the key: it holds no value, and the
	// fill that ends the lease succeeds only if no invalidation came first.
	Lease bool
	// NotFound is true for a cached "not found".
	NotFound bool
	// Version is the value's version, as Options.VersionOf gave it; 0 when
	// the cache has no VersionOf.
	Version int64
}

// Describe reads the header of an entry as the cache stores it; ok is false
// when raw is not a writethrough entry.
func Describe(raw []byte) (s Stored, ok bool) {
	e, err := decodeEntry(raw)
	if err != nil {
		return Stored{}, false
	}
	return Stored{Lease: e.kind == kindLease, NotFound: e.kind == kindNotFound, Version: e.version}, true
}
