// Package queuestest holds an SQS in memory, for the tests that need
// nothing running (go test -short): the worker, the poller and the tools;
// and Contract, the behaviours the code relies on of SQS, which its tests
// run against the fake and against moto: a fake that drifts from the real
// thing fails its run. Only tests import it.
package queuestest
