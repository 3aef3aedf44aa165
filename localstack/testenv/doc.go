// Package testenv gives integration tests the clients of the local stack
// (localstack/up.sh), built from the environment that localstack/env.sh
// exports: the same variables the worker reads.
//
// A test that needs the stack asks for it through this package first. When
// the stack is not up, the test is skipped on a developer's machine with a
// message saying how to start it, but fails when CI is set, so that CI can
// never pass by skipping.
package testenv
