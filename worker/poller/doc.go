// Package poller consumes an SQS queue for as long as it runs: the worker
// for ECS and EC2. It keeps the semantics of Lambda's SQS event source with
// ReportBatchItemFailures — only the messages done with are deleted — and
// adds what a long-running consumer needs: long polling with several
// receivers, visibility extension for slow batches, messages that failed
// for now handed back after a growing backoff (those that failed for good
// are parked by the worker and deleted), a gate that stops receiving
// while the whole cache is unreachable (probed: one node down stops
// nothing), a /healthz endpoint, and a graceful drain on SIGTERM that
// hands back what it has not started.
package poller
