// Package worker is what every front end runs: it turns a batch of event
// records into invalidations and reports each record the way its event
// source expects — SQS batch item failures, an error for SNS, stream
// sequence numbers — with one JSON log line and one CloudWatch Embedded
// Metric Format line per batch. The Lambda mains and the poller only read
// their configuration and hand batches to a Worker.
package worker
