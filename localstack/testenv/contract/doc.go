// Package contract holds the behaviours the code relies on of a cache and
// of SQS, one table each, for tests to run against every implementation:
// the fakes of localstack/fakes, which the tests that need nothing running
// use, and the real adapters on the local stack (valkey-go through
// invalidate.Valkey and the worker's connection, logged in as the worker's
// ACL user; the AWS SDK's SQS client on moto). A fake that drifts from the
// real thing then fails its run.
//
// Only tests import it. It lives beside testenv, as test support, apart
// from internal's helpers that the packages and front ends stand on.
package contract
