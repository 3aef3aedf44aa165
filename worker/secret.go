package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"github.com/invalidator-go/invalidator/elasticache"
)

// errNoPassword: the secret's value is not JSON with a "password" key.
var errNoPassword = errors.New(`the secret holds no "password" key in its JSON`)

// SecretsManager is what reading the cache's password needs of Secrets
// Manager; *secretsmanager.Client has it.
type SecretsManager interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretPassword reads the cache's password from the secret at an ARN
// (elasticache.PasswordSecret's Read): the "password" key of its
// SecretString, as template.yaml's CachePasswordSecretArn holds it and the
// poller's ECS secret reads it.
func SecretPassword(client SecretsManager) func(ctx context.Context, arn string) (string, error) {
	return func(ctx context.Context, arn string) (string, error) {
		out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return "", err
		}
		var secret struct {
			Password string `json:"password"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &secret); err != nil || secret.Password == "" {
			return "", errNoPassword
		}
		return secret.Password, nil
	}
}

// checkSecretAtStart reads the password's secret once as the process
// starts. A secret that can never give it — none at that ARN, access
// denied, its key or KMS key unusable, no "password" in it — is a
// configuration no retry mends: the process stops, naming the ARN, instead
// of failing every record for now until the DLQ takes them. Any other
// failure (the network, throttling) lets it start: the connections read
// the secret again, and later failures stay for now, so that an outage of
// Secrets Manager or a rotation parks nothing.
func checkSecretAtStart(secret *elasticache.PasswordSecret) error {
	if secret == nil || secret.Read == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := secret.Read(ctx, secret.ARN)
	if err == nil || !secretUnusable(err) {
		return nil
	}
	return fmt.Errorf("CACHE_PASSWORD_SECRET_ARN=%s: the cache's password cannot be read from it: %w", secret.ARN, err)
}

// secretUnusable tells the errors of a secret that stay whatever the wait.
func secretUnusable(err error) bool {
	var (
		notFound   *types.ResourceNotFoundException
		badParam   *types.InvalidParameterException
		badRequest *types.InvalidRequestException
		decryption *types.DecryptionFailure
		api        smithy.APIError
	)
	switch {
	case errors.Is(err, errNoPassword), errors.As(err, &notFound), errors.As(err, &badParam),
		errors.As(err, &badRequest), errors.As(err, &decryption):
		return true
	case errors.As(err, &api):
		// Not modelled by Secrets Manager's API: the IAM policy's refusal.
		return api.ErrorCode() == "AccessDeniedException"
	}
	return false
}
