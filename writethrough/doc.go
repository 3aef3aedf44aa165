// Package writethrough gives services the two cache layers that surround
// the event-driven invalidator: invalidate-on-write (or a version-guarded
// write-through) with a TTL backstop, and a cache-aside read path that stays
// correct under concurrency.
//
// The read path, Get, costs one round trip on a hit. On a miss, one caller
// across all processes takes a lease stored in the key itself (SET NX PX of
// a placeholder carrying a random token), loads, and fills the key with a
// compare-and-set that only succeeds while its lease is still there: an
// invalidation that lands during the load deletes the lease, and the stale
// fill is dropped. Other callers wait briefly for the value. Within a
// process, concurrent misses of one key share a single load. Values near
// expiry are refreshed early, with the probability of XFetch (Vattani,
// Chierichetti, Lowenstein, VLDB 2015), so a hot key is recomputed before it
// expires rather than by a stampede after. "Not found" is cached too, for a
// shorter time, and a value that no longer decodes is deleted and reloaded,
// as is anything else found at a key (counted in Stats, and logged): a
// value that is not an entry, a lease that would not expire within
// LeaseTTL, which no loader holds.
//
// The write path invalidates after the database write (Write), or updates a
// cached value of a known older version in place (WriteThrough): a late
// write never overwrites a newer value, nor refills a key that an
// invalidation emptied.
//
// While the cache is down, services keep serving. No call waits for it
// longer than CacheTimeout (150 ms by default), whatever the caller's
// deadline: Get then loads directly and does not fill, since only a fill
// under a lease is safe from racing an invalidation. After
// BreakerThreshold calls in a row found it down (5), a breaker skips the
// cache for BreakerCoolDown (1 s), so a read costs a load and no wait; then
// one call at a time probes it, and the first answer closes the breaker.
// Writes run the database write, then report the cache's failure as
// ErrInvalidate with ErrCacheUnavailable: the key is left for the
// event-driven invalidator to delete.
//
// A Cache reads and fills through the client it is given, which must reach
// the primaries (elasticache.Config without ReplicaReads): a replica may
// serve a value for its replication lag after the value's invalidation
// finished.
//
// Every cached entry is an envelope: a short header (kind, stamp, version,
// recompute time, logical expiry) and the encoded value. The invalidator's
// plain deletes work on it as on any key.
package writethrough
