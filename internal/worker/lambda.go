package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/internal/parking"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SQS is what a worker needs of SQS: to park records in the failure queue
// and hand messages back to theirs. *sqs.Client has it.
type SQS interface {
	parking.SQS
	Queues
}

// Start builds, once per process, the logger and the Worker named name,
// and starts connecting to the cache in the background: the process
// starts, and answers, whether or not the cache can be reached — records
// fail for now until it can. With IAM authentication the caller has filled
// in cfg.Cache.IAM's Region and Credentials. queues parks in the failure
// queue, when there is one, and hands failed SQS messages back. A
// configuration that can never connect (an unreadable CACHE_CA_FILE, IAM
// without credentials) is an error. Close the Worker when done.
func Start(name string, cfg Config, queues SQS) (*Worker, error) {
	logger := NewLogger(os.Stdout, cfg.LogLevel).With("function", name)
	slog.SetDefault(logger)
	opt, err := cfg.Cache.ClientOption()
	if err != nil {
		return nil, err
	}
	conn := newConnection(opt, cfg.Cache.Endpoint, logger)
	opts := Options{Name: name, Logger: logger, Namespace: cfg.Namespace, Queues: queues}
	if cfg.FailureQueueURL != "" {
		opts.Park = parking.Queue{Client: queues, URL: cfg.FailureQueueURL}
	} else {
		logger.Warn("no FAILURE_QUEUE_URL: records that fail for good are handed back to their source, to be retried until its DLQ or on-failure destination takes them")
	}
	w := New(invalidate.New(conn, invalidate.Options{Rules: cfg.Rules}), opts)
	w.conn = conn
	return w, nil
}

// NewLogger writes JSON lines of level and above to w, timed in UTC: the same
// on every host, and formatting them never loads the local time zone, which
// made a fresh process's first log line 0.15 ms slower.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: utc}))
}

func utc(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}

// Exit stops a process that cannot start, with one clear line.
func Exit(name string, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	NewLogger(os.Stderr, slog.LevelInfo).Error("cannot start", "function", name, "error", msg)
	os.Exit(1)
}

// payloadHandler is a lambda.Handler, so aws-lambda-go hands it each
// invoke's payload untouched. A handler function would have the payload
// decoded with encoding/json first, which for an SQS batch costs more than
// all the rest of handling it (bench/README.md).
type payloadHandler[R any] func(ctx context.Context, payload []byte) (R, error)

func (h payloadHandler[R]) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	resp, err := h(ctx, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

// Lambda runs the Lambda function name, handle serving every invoke's
// payload with the one worker of the process. IAM tokens and SQS calls are
// signed with the execution role's credentials, which Lambda puts in the
// environment — what the AWS SDK would read there, without its weight at
// cold start.
//
// The settings are checked before anything else, and a bad value stops the
// function at once. Connecting to the cache — a TLS handshake, the login
// and the discovery of the cluster, most of a cold start — then runs while
// the runtime asks for the first event, and an invoke that finds the cache
// unreachable answers that its records failed for now. An environment made
// ahead of its first event (provisioned concurrency, managed instances:
// AWS_LAMBDA_INITIALIZATION_TYPE other than on-demand) waits for the first
// attempt at init, before it may be frozen.
func Lambda[R any](name string, handle func(*Worker, context.Context, []byte) (R, error)) {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		Exit(name, err)
	}
	creds := credentials.NewStaticCredentialsProvider(
		os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	if iam := cfg.Cache.IAM; iam != nil {
		iam.Region, iam.Credentials = os.Getenv("AWS_REGION"), creds
	}
	queues := sqs.New(sqs.Options{Region: os.Getenv("AWS_REGION"), Credentials: creds, BaseEndpoint: endpoint()})
	w, err := Start(name, cfg, queues)
	if err != nil {
		Exit(name, err)
	}
	if !slices.Contains([]string{"", "on-demand"}, os.Getenv("AWS_LAMBDA_INITIALIZATION_TYPE")) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second) // init has 10
		_, _ = w.conn.get(ctx)
		cancel()
	}
	lambda.Start(payloadHandler[R](func(ctx context.Context, payload []byte) (R, error) {
		return handle(w, ctx, payload)
	}))
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
