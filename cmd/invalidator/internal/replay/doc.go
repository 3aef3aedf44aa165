// Package replay re-invalidates what the failure path kept: the records the
// worker parked in the failure queue, the coordinates of stream records a
// stream mapping gave up on (read again from the stream while it keeps
// them), the SNS invokes Lambda gave up on, and plain change messages
// (an SNS subscription's dead letters, a DLQ's messages). Each message is
// invalidated as the worker invalidates a batch, through a Worker: within
// its ECPU budget, and scheduled to be deleted again. A message whose
// changes are all invalidated is deleted; one that fails again stays, and
// says why.
package replay
