// Package queues is the worker's SQS, for both front ends: every call
// behind a record's fate — receive, delete what is done, hand back what
// failed for now, send to the delay, window and failure queues — on
// receipt handles, bodies and String attributes, not the SDK's types.
package queues
