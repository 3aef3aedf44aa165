// Package fleetbudget is the ECPU budget every worker process on a cache
// shares, kept in the cache itself: at a key, its state a theoretical
// arrival time (GCRA) that each grant moves on by its ECPUs at the
// budget's rate. A grant is spent at once; what may go at once is bounded
// by how far ahead of the cache's clock the arrival time may run: a grant
// to tag pages or second deletes is made while it is at most Ahead ahead;
// first deletes are never refused, and wait their turn only beyond Ahead
// plus Reserve, so that no process's pages hold back another's first
// deletes. A refused take joins a line and is told when to come back.
// Over any interval T the fleet is granted at most T × the rate, plus
// (Ahead + Reserve) × the rate, plus the largest grant. A Budget takes
// from a second key, on another shard, while the first's node fails over:
// a failover may add BackAfter × the rate, while the processes that left
// the first key come back to it.
package fleetbudget
