package main

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/internal/frontend/worker"
)

// session is what a verb that talks to AWS and the cache holds.
type session struct {
	cfg   worker.Config
	aws   aws.Config
	cache valkey.Client
}

// connect reads the worker's configuration from this environment, with
// the cache endpoint and the rules file the flags gave, and connects to AWS
// and the cache as the worker would (IAM auth with these credentials, the
// password read from CACHE_PASSWORD_SECRET_ARN with them).
func connect(ctx context.Context, endpoint, rules string) (session, error) {
	getenv := ruleEnv(rules, func(key string) string {
		if key == "CACHE_ENDPOINT" {
			return endpoint
		}
		return os.Getenv(key)
	})
	var s session
	var err error
	if s.cfg, err = worker.ConfigFromEnv(getenv); err != nil {
		return s, err
	}
	if s.aws, err = config.LoadDefaultConfig(ctx); err != nil {
		return s, err
	}
	s.cfg.Cache.SignWith(s.aws.Region, s.aws.Credentials)
	if secret := s.cfg.Cache.PasswordSecret; secret != nil {
		secret.Read = worker.SecretPassword(secretsmanager.NewFromConfig(s.aws))
	}
	s.cache, err = elasticache.New(s.cfg.Cache)
	return s, err
}
