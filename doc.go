// Package invalidator is the root of the invalidator module: event-driven
// cache invalidation for services on AWS with ElastiCache Serverless for
// Valkey. The code lives in its packages — events (decoding), invalidate
// (rules and deletes), writethrough (the services' library), recipes,
// functions (the Lambda functions and the poller) — and the deployment in
// template.yaml, whose safety properties this package's tests check.
package invalidator
