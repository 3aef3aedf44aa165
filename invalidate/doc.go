// Package invalidate plans the cache keys of decoded changes and deletes
// them on a Valkey cluster.
//
// Rules ([Rules]) turn each change into keys: explicit keys when the change
// carries them, else the templates of its entity (change messages) or table
// (DynamoDB stream records), else cache:{entity}:{id}. A key that cannot be
// planned safely — a placeholder missing or empty, a key too long — fails
// its record instead of deleting a wrong key. Keys are exact: no KEYS, no
// SCAN, no patterns; "*", spaces, CR/LF and braces in IDs are data.
//
// An [Invalidator] decodes a [Batch] of input records ([Inputs]) and deletes
// their keys through a [Cache] — [Valkey] adapts a valkey-go client: one
// UNLINK per key in one DoMulti, which routes every command to the node
// owning its slot, so no request is ever cross-slot or near the
// 3,999-argument limit. Large batches are decoded on every CPU, chunk by
// chunk, and each chunk's keys are sent while the next chunks are decoded;
// each distinct key is deleted once. Keys that fail for now — the closed
// list of errors that may pass: a lost or refused connection, a timeout,
// CLUSTERDOWN, TRYAGAIN, LOADING, a failover, a busy, full or throttling
// cache, a rotated password — are retried with backoff until the context's
// deadline; any other error fails its record for good. Each record gets a
// [Result]: its keys, each deleted or already absent, or the error that
// failed it, and whether it failed for now (retry it) or for good (park it).
package invalidate
