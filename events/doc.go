// Package events decodes the change events that reach the worker — SQS
// messages, SNS records and DynamoDB stream records — into one model,
// [Change]. It only decodes: which cache keys a change invalidates is the
// business of package invalidate.
//
// An SQS body or an SNS message holds a change message, our own JSON:
//
//	{"entity":"product","id":"42","op":"update","version":7,"occurredAt":"2026-11-29T12:00:00Z"}
//
// entity (string) and id (string or integer) name what changed; op (create,
// update or delete), version (integer), occurredAt (RFC 3339) and keys
// (explicit cache keys, replacing the rules) are optional; secondDelete
// (true, with keys) marks a worker's own delayed second delete, and failover
// (true, beside it) the failover schedule's. A body may also be
// a JSON array of change messages. In SQS the message may arrive raw, wrapped
// in an SNS envelope ("Type":"Notification", "Message": the change as a
// string) or in an EventBridge envelope ("detail-type", "detail": the change
// as an object); an SNS message may carry an EventBridge envelope too.
//
// A record that cannot be decoded yields an error naming the record
// and the reason; decoders never panic.
package events
