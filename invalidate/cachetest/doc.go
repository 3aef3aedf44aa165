// Package cachetest holds an invalidate.Cache in memory, for the tests that
// need nothing running (go test -short): the worker, the poller and the
// invalidator's own logic. localstack/testenv/contract holds it to the
// behaviours of the real one.
package cachetest
