// Package testenv gives integration tests the clients of the local stack
// (localstack/up.sh), built from the environment that localstack/env.sh
// exports: the same variables the worker reads.
//
// A test that needs the stack asks for it through this package first. When
// the stack is not up, the test is skipped on a developer's machine with a
// message saying how to start it, but fails when CI is set, so that CI can
// never pass by skipping.
package testenv

import (
	"context"
	"net"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheconn"
)

const howToStart = "start the local stack with `make up` and run tests with `make test` (or `. localstack/env.sh` first)"

// InCI reports whether the CI variable is set to a true value.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Unavailable stops a test whose local stack is missing: a skip on a
// developer's machine, a failure in CI.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("local stack required (CI is set): %s", why)
	}
	t.Skipf("local stack not available: %s; %s", why, howToStart)
}

// Getenv returns a variable of the stack's environment, or stops the test
// when it is unset.
func Getenv(t testing.TB, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		Unavailable(t, key+" is not set")
	}
	return v
}

// AWS returns an SDK configuration for moto, after checking that moto
// accepts connections. The SDK reads AWS_ENDPOINT_URL itself.
func AWS(t testing.TB) aws.Config {
	t.Helper()
	endpoint := Getenv(t, "AWS_ENDPOINT_URL")
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("AWS_ENDPOINT_URL=%q is not a URL", endpoint)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		Unavailable(t, "moto is not answering on "+u.Host+": "+err.Error())
	}
	conn.Close()
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatalf("AWS configuration: %v", err)
	}
	return cfg
}

// SQS returns an SQS client for moto.
func SQS(t testing.TB) *sqs.Client { t.Helper(); return sqs.NewFromConfig(AWS(t)) }

// SNS returns an SNS client for moto.
func SNS(t testing.TB) *sns.Client { t.Helper(); return sns.NewFromConfig(AWS(t)) }

// DynamoDB returns a DynamoDB client for moto.
func DynamoDB(t testing.TB) *dynamodb.Client { t.Helper(); return dynamodb.NewFromConfig(AWS(t)) }

// Streams returns a DynamoDB Streams client for moto.
func Streams(t testing.TB) *dynamodbstreams.Client {
	t.Helper()
	return dynamodbstreams.NewFromConfig(AWS(t))
}

// CacheConfig returns the worker's cache configuration for the local cluster.
func CacheConfig(t testing.TB) cacheconn.Config {
	t.Helper()
	cfg, err := cacheconn.FromEnv(os.Getenv)
	if err != nil {
		Unavailable(t, err.Error())
	}
	return cfg
}

// Cache returns a cluster client logged in as the stack's ACL user over TLS,
// closed when the test ends.
func Cache(t testing.TB) valkey.Client {
	t.Helper()
	client, err := cacheconn.New(CacheConfig(t))
	if err != nil {
		Unavailable(t, "the cache cluster is not answering: "+err.Error())
	}
	t.Cleanup(client.Close)
	return client
}
