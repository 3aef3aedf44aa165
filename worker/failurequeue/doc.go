// Package failurequeue is the failure queue: where the worker sends a record
// that failed for good — it cannot be decoded or planned, the cache refuses
// its keys — as it came, with the reason and its coordinates as message
// attributes, so that it never blocks its source nor uses up retries, and
// where `invalidator replay` finds it again once the cause is fixed.
package failurequeue
