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
// their keys. Large batches are decoded on every CPU, chunk by chunk, and
// each chunk's keys are sent while the next chunks are decoded. Each
// distinct key is deleted once, by one UNLINK through valkey-go's DoMulti,
// which routes every
// command to the node owning its slot, so no request is ever cross-slot or
// near the 3,999-argument limit. Transient errors (timeouts, lost
// connections, TRYAGAIN, CLUSTERDOWN, LOADING) are retried with backoff
// within the context deadline. Each record gets a [Result]: its keys, each
// deleted or already absent, or the error that failed it.
package invalidate
