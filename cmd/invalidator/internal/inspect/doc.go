// Package inspect measures how consistent a cache is with the changes that
// invalidate it, as a second consumer of the same events: it reads changes
// from a DynamoDB stream or an SQS queue subscribed to the topic, samples a
// fraction of them, plans their keys with the worker's rules, and at fixed
// delays after each change reads those keys. A key is consistent when it is
// absent, holds a writethrough lease, or holds a value whose version is at
// least the change's. Consistency at each delay is reported as a share and
// as "nines", as Meta's Polaris measures it.
//
// It only reads the cache (GET), and it consumes only its own copy of the
// events: the worker's queue and its share of a stream's read capacity are
// left alone.
package inspect
