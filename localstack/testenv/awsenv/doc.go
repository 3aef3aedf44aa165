// Package awsenv gives tests clients of the local stack's AWS APIs (moto,
// or LocalStack), apart from package testenv so that the tests of the
// packages services import — writethrough, elasticache — need none of the
// AWS SDK's service clients or its config chain: a service's go.sum then
// names none of them.
package awsenv
