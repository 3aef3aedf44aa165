package lambda

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// Start runs the Lambda function name on aws-lambda-go, handle serving
// every invoke's raw payload with the one worker of the process, and never
// returns. IAM tokens, SQS calls and, with CACHE_PASSWORD_SECRET_ARN, the
// reads of the cache's password are signed with the execution role's
// credentials, which Lambda puts in the environment — what the AWS SDK
// would read there, without its config loader's weight at cold start.
//
// The settings are checked before anything else, and a bad value stops the
// function at once. Connecting to the cache — a TLS handshake, the login
// and the discovery of the cluster, most of a cold start — then runs while
// the runtime asks for the first event, and an invoke that finds the cache
// unreachable answers that its records failed for now. An environment made
// ahead of its first event (provisioned concurrency, managed instances:
// AWS_LAMBDA_INITIALIZATION_TYPE other than on-demand) waits for the first
// attempt at init, before it may be frozen.
//
// Each invoke's log lines and parked records carry its request ID and
// trace header. The function registers for SIGTERM, which Lambda then sends
// before it stops the environment: the invokes in flight finish, then the
// cache and SQS connections are closed.
func Start[R any](name string, handle func(*worker.Worker, context.Context, []byte) (R, error)) {
	cfg, err := worker.ConfigFromEnv(os.Getenv)
	if err != nil {
		initError(name, err)
	}
	creds := credentials.NewStaticCredentialsProvider(
		os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	cfg.Cache.SignWith(os.Getenv("AWS_REGION"), creds)
	transport := awshttp.NewBuildableClient().GetTransport() // the SDK's defaults, closable at shutdown
	client := queues.New(os.Getenv("AWS_REGION"), creds, endpoint(os.Getenv("AWS_ENDPOINT_URL_SQS")), &http.Client{Transport: transport})
	if s := cfg.Cache.PasswordSecret; s != nil {
		s.Read = worker.SecretPassword(secretsmanager.New(secretsmanager.Options{Region: os.Getenv("AWS_REGION"), Credentials: creds,
			BaseEndpoint: endpoint(os.Getenv("AWS_ENDPOINT_URL_SECRETS_MANAGER")), HTTPClient: &http.Client{Transport: transport}}))
	}
	w, err := worker.Start(name, cfg, client)
	if err != nil {
		initError(name, err)
	}
	if !slices.Contains([]string{"", "on-demand"}, os.Getenv("AWS_LAMBDA_INITIALIZATION_TYPE")) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second) // init has 10
		_ = w.Connect(ctx)
		cancel()
	}
	var inFlight sync.RWMutex // read-held by each invoke
	invoke := handler(func(ctx context.Context, payload []byte) ([]byte, error) {
		inFlight.RLock()
		defer inFlight.RUnlock()
		resp, err := handle(w, worker.WithInvocation(ctx, invocation(ctx)), payload)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	})
	awslambda.StartWithOptions(invoke, awslambda.WithEnableSIGTERM(func() {
		inFlight.Lock()
		defer inFlight.Unlock() // an invoke after this fails for now, on closed connections
		w.Close()
		transport.CloseIdleConnections()
		slog.Info("SIGTERM: the invokes in flight are done, the connections closed")
	}))
}

// handler serves raw payloads: aws-lambda-go hands a Handler its payload
// as it comes, without decoding it by reflection.
type handler func(ctx context.Context, payload []byte) ([]byte, error)

func (h handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) { return h(ctx, payload) }

// invocation is the invoke's request ID and trace header, as aws-lambda-go
// puts them in its context.
func invocation(ctx context.Context) worker.Invocation {
	var inv worker.Invocation
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		inv.RequestID = lc.AwsRequestID
	}
	inv.TraceID, _ = ctx.Value("x-amzn-trace-id").(string) // aws-lambda-go's key
	return inv
}

// endpoint is the endpoint the environment names for a service, for local
// stacks: its own, AWS_ENDPOINT_URL_<service>, else AWS_ENDPOINT_URL, as
// the AWS SDK reads them; nil in AWS.
func endpoint(own string) *string {
	if v := cmp.Or(own, os.Getenv("AWS_ENDPOINT_URL")); v != "" {
		return aws.String(v)
	}
	return nil
}
