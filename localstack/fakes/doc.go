// Package fakes holds an invalidate.Cache and an SQS in memory, for the
// tests that need nothing running (go test -short): the worker, the poller
// and the invalidator's own logic. localstack/testenv/contract holds them to
// the behaviours of the real ones.
package fakes
