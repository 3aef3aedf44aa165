// Package invalidator is the root of the invalidator module: event-driven
// cache invalidation for services on AWS with ElastiCache Serverless for
// Valkey. The code lives in its packages — for services: events (decoding),
// invalidate (rules and deletes), writethrough (their library), elasticache
// (connecting), recipes; worker (the pipeline, the poller, the Lambda
// runtime wrapper) and functions (their mains) — and the deployment in
// template.yaml, whose safety properties this package's tests check.
package invalidator
