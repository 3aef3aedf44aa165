// Package fakes holds an SQS in memory, for the tests that need nothing
// running (go test -short): the worker, the poller and the tools.
// localstack/testenv/contract holds it to the behaviours of the real one.
package fakes
