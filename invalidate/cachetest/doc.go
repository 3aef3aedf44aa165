// Package cachetest holds an invalidate.Cache in memory, for the tests that
// need nothing running (go test -short): the worker, the poller and the
// invalidator's own logic; and Contract, the behaviours the code relies on
// of a cache, which its tests run against the fake and against the local
// stack (valkey-go through invalidate.Valkey, logged in as the worker's ACL
// user; the worker's connection runs it too): a fake that drifts from the
// real thing fails its run.
package cachetest
