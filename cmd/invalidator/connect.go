package main

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/worker"
)

// session is what a verb that talks to AWS and the cache holds.
type session struct {
	cfg   worker.Config
	aws   aws.Config
	cache valkey.Client
}

// connect reads the worker's configuration from this environment, with
// the cache endpoint and the rules file the flags gave, and connects to AWS
// and the cache as the worker would.
func connect(ctx context.Context, endpoint, rules string) (session, error) {
	s, err := settings(ctx, endpoint, rules)
	if err == nil {
		s.cache, err = dial(s.aws, s.cfg.Cache)
	}
	return s, err
}

// settings is connect without the cache: the configuration and AWS's.
func settings(ctx context.Context, endpoint, rules string) (session, error) {
	var s session
	var err error
	if s.cfg, err = worker.ConfigFromEnv(ruleEnv(rules, endpointEnv(endpoint))); err != nil {
		return s, err
	}
	s.aws, err = config.LoadDefaultConfig(ctx)
	return s, err
}

// endpointEnv is this environment with the cache endpoint a flag gave.
func endpointEnv(endpoint string) func(string) string {
	return func(key string) string {
		if key == "CACHE_ENDPOINT" {
			return endpoint
		}
		return os.Getenv(key)
	}
}

// dial connects to the cache as the worker would: IAM auth signed with
// these AWS credentials, or the password read from
// CACHE_PASSWORD_SECRET_ARN with them.
func dial(cfg aws.Config, c elasticache.Config) (valkey.Client, error) {
	c.SignWith(cfg.Region, cfg.Credentials)
	if secret := c.PasswordSecret; secret != nil {
		secret.Read = worker.SecretPassword(secretsmanager.NewFromConfig(cfg))
	}
	return elasticache.New(c)
}
