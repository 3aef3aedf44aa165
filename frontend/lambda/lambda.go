package lambda

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/frontend/worker"
	"github.com/invalidator-go/invalidator/internal/lambdaruntime"
)

// Start runs the Lambda function name, handle serving every invoke's raw
// payload with the one worker of the process, and never returns. IAM tokens
// and SQS calls are signed with the execution role's credentials, which
// Lambda puts in the environment — what the AWS SDK would read there,
// without its weight at cold start.
//
// The settings are checked before anything else, and a bad value stops the
// function at once. Connecting to the cache — a TLS handshake, the login
// and the discovery of the cluster, most of a cold start — then runs while
// the runtime asks for the first event, and an invoke that finds the cache
// unreachable answers that its records failed for now. An environment made
// ahead of its first event (provisioned concurrency, managed instances:
// AWS_LAMBDA_INITIALIZATION_TYPE other than on-demand) waits for the first
// attempt at init, before it may be frozen.
func Start[R any](name string, handle func(*worker.Worker, context.Context, []byte) (R, error)) {
	cfg, err := worker.LoadConfig(os.Getenv)
	if err != nil {
		initError(name, err)
	}
	creds := credentials.NewStaticCredentialsProvider(
		os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	if iam := cfg.Cache.IAM; iam != nil {
		iam.Region, iam.Credentials = os.Getenv("AWS_REGION"), creds
	}
	queues := sqs.New(sqs.Options{Region: os.Getenv("AWS_REGION"), Credentials: creds, BaseEndpoint: endpoint()})
	w, err := worker.Start(name, cfg, queues)
	if err != nil {
		initError(name, err)
	}
	if !slices.Contains([]string{"", "on-demand"}, os.Getenv("AWS_LAMBDA_INITIALIZATION_TYPE")) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second) // init has 10
		_ = w.Connect(ctx)
		cancel()
	}
	lambdaruntime.Start(func(ctx context.Context, payload []byte) ([]byte, error) {
		resp, err := handle(w, ctx, payload)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	})
}

// initError stops a function that cannot start: one line in its log, and
// the reason, not an anonymous exit, for the invoke waiting on it.
func initError(name string, err error) {
	worker.LogStartFailure(name, err)
	lambdaruntime.InitError(err)
}

// endpoint is the SQS endpoint the environment names, for local stacks
// (AWS_ENDPOINT_URL_SQS, else AWS_ENDPOINT_URL, as the AWS SDK reads them);
// nil in AWS.
func endpoint() *string {
	for _, key := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"} {
		if v := os.Getenv(key); v != "" {
			return aws.String(v)
		}
	}
	return nil
}
