// Package near is writethrough's near cache: an in-process tier in front
// of the shared cache that the invalidator's announcements keep
// consistent. A hit is served from memory; a read from the shared cache is
// kept, unless its key was announced or the tier flushed while it ran.
//
// Every process opens one Channel: a subscription to the channel the
// invalidator announces its deletes on (package invalidate/announce), and
// a publisher of the process's own writes. The Channel never lets a tier
// serve what it cannot vouch for: the subscription lost — the server
// dropping a slow consumer, CLIENT KILL, a node gone, a failover —, the
// subscription's PING unanswered, a publisher's sequence numbers jumping
// (a message lost) or not to be trusted, a message it cannot read: each flushes
// every tier, and nothing is kept until the subscription is confirmed
// again. What no signal shows — a publisher's last message lost, and the
// publisher gone before it confirmed it — the tier's MaxLifetime bounds.
//
// It is a package apart so that only the services that use it link its
// store, github.com/maypok86/otter/v2.
package near
