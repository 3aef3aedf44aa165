// Package own names the worker's queues — by variable, by the local
// stack's name, by template.yaml's logical ID — and refuses them to a tool
// that deletes what it reads: `invalidator inspect` and `invalidator
// replay` pointed at the wrong queue refuse it rather than consume it.
// The worker does not link it.
package own
