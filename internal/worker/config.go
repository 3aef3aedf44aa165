package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheconn"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Config is what every front end reads from its environment.
type Config struct {
	Cache cacheconn.Config // CACHE_*
	Rules *invalidate.Rules
	// LogLevel is LOG_LEVEL: debug, info (default), warn or error.
	LogLevel slog.Level
	// Namespace is METRICS_NAMESPACE, default "Invalidator": a CloudWatch
	// namespace, up to 255 of A-Z a-z 0-9 . - _ / # : and space, not
	// beginning with AWS/.
	Namespace string
}

// LoadConfig reads and validates the configuration; the error names the
// variable at fault.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	var err error
	if c.Cache, err = cacheconn.FromEnv(getenv); err != nil {
		return c, err
	}
	if c.Rules, err = invalidate.LoadRules(getenv); err != nil {
		return c, err
	}
	if v := getenv("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	if c.Namespace = getenv("METRICS_NAMESPACE"); c.Namespace != "" && !validNamespace(c.Namespace) {
		return c, fmt.Errorf("METRICS_NAMESPACE=%q: want up to 255 of A-Z a-z 0-9 . - _ / # : and space, not beginning with AWS/", c.Namespace)
	}
	return c, nil
}

// validNamespace says whether CloudWatch accepts ns as a namespace.
func validNamespace(ns string) bool {
	if len(ns) > 255 || strings.TrimSpace(ns) == "" || strings.HasPrefix(ns, "AWS/") {
		return false
	}
	for _, c := range ns {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune(".-_/#: ", c)) {
			return false
		}
	}
	return true
}

// Start builds, once per process, the logger, the cache client and the
// Worker named name. With IAM authentication the caller has filled in
// cfg.Cache.IAM's Region and Credentials. The returned client is the
// caller's to close.
func Start(name string, cfg Config) (*Worker, valkey.Client, error) {
	logger := NewLogger(os.Stdout, cfg.LogLevel).With("function", name)
	slog.SetDefault(logger)
	client, err := cacheconn.New(cfg.Cache)
	if err != nil {
		return nil, nil, err
	}
	inv := invalidate.New(client, invalidate.Options{Rules: cfg.Rules})
	return New(inv, Options{Name: name, Logger: logger, Namespace: cfg.Namespace}), client, nil
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
// decoded with encoding/json first: for an SQS batch 10–16 µs per message
// into aws-lambda-go's types, 9 even into a json.RawMessage, more than all
// the rest of handling it.
type payloadHandler[R any] func(ctx context.Context, payload []byte) (R, error)

func (h payloadHandler[R]) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	resp, err := h(ctx, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

// Lambda runs the Lambda function name, handle serving every invoke's
// payload with the one worker of the process. IAM tokens are signed with the execution
// role's credentials, which Lambda puts in the environment — what the AWS
// SDK would read there, without its weight at cold start.
//
// The settings are checked before anything else, and a bad value stops the
// function at once. Connecting to the cache — reading CACHE_CA_FILE, a TLS
// handshake, the login and the discovery of the cluster, most of a cold
// start — then runs while the runtime asks for the first event; the first
// invoke waits for it. Should it fail, the function stops as it would at
// init, with the same one line, and Lambda retries the invoke. Only an
// environment made on demand (AWS_LAMBDA_INITIALIZATION_TYPE on-demand, or
// unset as under the emulator) does so: one made ahead of its first event
// (provisioned concurrency, managed instances) connects at init, before it
// may be frozen.
func Lambda[R any](name string, handle func(*Worker, context.Context, []byte) (R, error)) {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		Exit(name, err)
	}
	if iam := cfg.Cache.IAM; iam != nil {
		iam.Region = os.Getenv("AWS_REGION")
		iam.Credentials = credentials.NewStaticCredentialsProvider(
			os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	}
	var w *Worker
	started := make(chan struct{})
	serve := func() {
		lambda.Start(payloadHandler[R](func(ctx context.Context, payload []byte) (R, error) {
			select {
			case <-started:
				return handle(w, ctx, payload)
			case <-ctx.Done():
				var none R
				return none, fmt.Errorf("still connecting to the cache: %w", ctx.Err())
			}
		}))
	}
	onDemand := slices.Contains([]string{"", "on-demand"}, os.Getenv("AWS_LAMBDA_INITIALIZATION_TYPE"))
	if onDemand {
		// Connecting is the longer path to the first result: it keeps the
		// goroutine already running, and the runtime loop waits for a
		// thread of its own.
		go serve()
	}
	if w, _, err = Start(name, cfg); err != nil {
		Exit(name, err)
	}
	close(started)
	if onDemand {
		select {} // lambda.Start never returns
	}
	serve()
}
