// Package poller consumes an SQS queue for as long as it runs: the worker
// for ECS and EC2. It keeps the semantics of Lambda's SQS event source —
// only the messages whose records succeeded are deleted; failed ones
// reappear after their visibility timeout and reach the DLQ after the
// queue's maxReceiveCount — and adds what a long-running consumer needs:
// long polling with several receivers, visibility extension for slow
// batches, backoff when SQS or the cache fails, a /healthz endpoint, and a
// graceful drain on SIGTERM.
package poller
