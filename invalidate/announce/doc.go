// Package announce is the protocol by which the invalidator tells the
// processes' local tiers (writethrough/near) what it deleted: one pub/sub
// message per batch of deletes, after they succeeded, on a channel every
// process subscribes to (plain SUBSCRIBE and PUBLISH, which ElastiCache
// Serverless has; PSUBSCRIBE and CLIENT TRACKING it has not, or not
// documented).
//
// Every message carries its publisher's ID, when the publisher started,
// and a sequence number: 1, 2, 3… over all its messages, heartbeats too. A
// subscriber that sees a publisher's number jump has missed a message of
// it, whatever lost it, and must forget everything it holds. A heartbeat
// is a message without keys: a publisher whose last announcement was lost
// shows the gap with its next heartbeat.
package announce
