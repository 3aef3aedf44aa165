package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
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
	// Namespace is METRICS_NAMESPACE, default "Invalidator".
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
	c.Namespace = getenv("METRICS_NAMESPACE")
	return c, nil
}

// Start builds, once per process, the logger, the cache client and the
// Worker named name. With IAM authentication the AWS SDK's default
// configuration signs the tokens. The returned client is the caller's to
// close.
func Start(ctx context.Context, name string, cfg Config) (*Worker, valkey.Client, error) {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: cfg.LogLevel})).With("function", name)
	slog.SetDefault(logger)
	if cfg.Cache.IAM != nil {
		aws, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("AWS configuration for IAM authentication: %w", err)
		}
		cfg.Cache.IAM.Region, cfg.Cache.IAM.Credentials = aws.Region, aws.Credentials
	}
	client, err := cacheconn.New(cfg.Cache)
	if err != nil {
		return nil, nil, err
	}
	inv := invalidate.New(client, invalidate.Options{Rules: cfg.Rules})
	return New(inv, Options{Name: name, Logger: logger, Namespace: cfg.Namespace}), client, nil
}

// FromEnv is LoadConfig from the process environment, then Start.
func FromEnv(ctx context.Context, name string) (*Worker, valkey.Client, error) {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	return Start(ctx, name, cfg)
}

// Exit stops a process that cannot start, with one clear line.
func Exit(name string, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("cannot start", "function", name, "error", msg)
	os.Exit(1)
}

// Lambda runs the Lambda function name: the worker is built once, at init,
// and handler(w) serves every invoke.
func Lambda(name string, handler func(*Worker) any) {
	w, _, err := FromEnv(context.Background(), name)
	if err != nil {
		Exit(name, err)
	}
	lambda.Start(handler(w))
}
