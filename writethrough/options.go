package writethrough

import (
	"encoding/json"
	"log/slog"
	"time"
)

// Codec encodes cached values. JSONCodec is the default.
type Codec[V any] interface {
	Marshal(v V) ([]byte, error)
	Unmarshal(data []byte) (V, error)
}

// JSONCodec encodes values with encoding/json.
type JSONCodec[V any] struct{}

// Marshal encodes v as JSON.
func (JSONCodec[V]) Marshal(v V) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes JSON into a V.
func (JSONCodec[V]) Unmarshal(data []byte) (V, error) {
	var v V
	err := json.Unmarshal(data, &v)
	return v, err
}

// Clock tells the time used for expiry, early refresh and the breaker's
// cool-down; tests give a fake one.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// LeaseTimeout says what a reader does when another process's load takes
// longer than the lease.
type LeaseTimeout int

const (
	// LoadWithoutFill loads the value itself and returns it, leaving the
	// key to the lease holder. The default: a reader is never failed by a
	// slow peer.
	LoadWithoutFill LeaseTimeout = iota
	// FailBusy returns ErrBusy, protecting the source from extra loads.
	FailBusy
)

// Options tune a Cache. The zero value gives the defaults.
type Options[V any] struct {
	// TTL is the backstop lifetime of a cached value, before jitter.
	// Default 10 minutes.
	TTL time.Duration
	// Jitter spreads lifetimes by ± this fraction of TTL, so keys written
	// together do not expire together. Default 0.1; negative means none.
	Jitter float64
	// Beta is XFetch's β: above 1 refreshes earlier, below 1 later, 0 never
	// early. Default 1; negative means 0.
	Beta float64
	// NegativeTTL is the lifetime of a cached "not found". Default 30 s.
	NegativeTTL time.Duration
	// LeaseTTL is how long a loader's lease holds the key; other callers
	// wait up to this long, and no more than half the time their context
	// has left, then do as OnLeaseTimeout says. A lease that would not
	// expire within it (PERSISTed, set without a TTL or with a longer one)
	// is no loader's: it is dropped, not waited on — so every Cache on the
	// same keys needs the same LeaseTTL, or the longer one's loads do not
	// fill while the shorter one reads. Default 3 s.
	LeaseTTL time.Duration
	// WaitStep is how often a waiting caller looks again. Default 10 ms.
	WaitStep time.Duration
	// OnLeaseTimeout says what a waiting caller does when the lease
	// outlives its wait. Default LoadWithoutFill.
	OnLeaseTimeout LeaseTimeout
	// Renew, when above 0, extends a hit's lifetime to a full TTL when less
	// than this fraction of it is left, instead of letting it be recomputed:
	// for hot keys whose freshness the event-driven invalidation already
	// guarantees. Tagged values are recomputed instead: their tags' lives
	// are tied to theirs. Default 0 (off).
	Renew float64
	// VersionOf returns a loaded value's version, the one WriteThrough is
	// given for it (a version column, an update counter). With it, values
	// that readers cache carry their version, and WriteThrough can update
	// them in place; without it, WriteThrough finds their version unknown
	// and invalidates them instead. Default none.
	VersionOf func(V) int64
	// TagsOf returns the tags a loaded value depends on, such as
	// "product:42" for each product a list holds and "category:shoes":
	// an invalidation of any of them (the invalidator's rules' tags, or a
	// change message's) deletes the value. With it, each fill registers
	// its key in its value's tags, ordered with its lease so that no
	// invalidation of a tag is missed, and each hit of a tagged value
	// checks that it is still registered (one more round trip); the first
	// fill of a tag the cache does not hold yet is not stored. WriteThrough
	// invalidates instead of storing. Default none.
	TagsOf func(V) []string
	// TagPrefix is where tags live: tag T at TagPrefix+T, the tag clock at
	// TagPrefix itself. The invalidator's rules must give the same
	// tagPrefix. Default "cache:tag:".
	TagPrefix string
	// CacheTimeout is how long one call to the cache may take. Past it, Get
	// loads directly, without filling, and a write returns
	// ErrCacheUnavailable; without it, valkey-go retries a read until the
	// caller's deadline. Default 150 ms.
	CacheTimeout time.Duration
	// BreakerThreshold is how many calls in a row may find the cache down —
	// no answer within CacheTimeout, no connection, CLUSTERDOWN, TRYAGAIN,
	// LOADING; not a miss, an error reply or a value that does not decode —
	// before the breaker opens. While it is open, calls skip the cache: Get
	// loads directly without waiting, a write returns ErrCacheUnavailable.
	// Default 5; negative: it never opens.
	BreakerThreshold int
	// BreakerCoolDown is how long the breaker stays open before one call at
	// a time, the probe, asks the cache again; the first answer closes it.
	// Default 1 s.
	BreakerCoolDown time.Duration
	// MaxBatch is the most keys GetMany gives its loader in one call.
	// Default 100, what DynamoDB's BatchGetItem takes.
	MaxBatch int
	// MaxConcurrentLoads bounds the loads that do not fill — the cache
	// down, the breaker open, a lease waited out — to this many at once in
	// this Cache, so that an outage of the cache does not turn every read
	// into a database read at once: a read beyond it waits for one to end
	// while its context allows, then gets ErrOverloaded. The direct loads
	// of a key in a process are one load whatever the bound. Default 0: no
	// bound. Set it above the readers a process runs at its busiest, so
	// that only an outage sheds.
	MaxConcurrentLoads int
	// Local is an in-process tier in front of the cache: hits from memory,
	// kept consistent by the invalidator's announcements
	// (writethrough/near.New). A Cache with TagsOf does not use it: its
	// hits check their tags in the shared cache. Default none.
	Local Local[V]
	// Logger receives a warning for each thing found at a key that no
	// Cache stores there, and dropped (see Stats). Default slog.Default().
	Logger *slog.Logger
	// Codec encodes values. Default JSONCodec.
	Codec Codec[V]
	// Clock tells the time. Default the system clock.
	Clock Clock
	// Rand returns a uniform number in [0, 1), for jitter and XFetch.
	// Default math/rand/v2.Float64.
	Rand func() float64
}
