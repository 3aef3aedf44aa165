package worker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

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
			return "", errors.New(`the secret holds no "password" key in its JSON`)
		}
		return secret.Password, nil
	}
}
