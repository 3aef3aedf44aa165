package worker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"
)

// secrets answers GetSecretValue with a value or an error.
type secrets struct {
	value string
	err   error
}

func (s secrets) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.value)}, nil
}

// TestASecretThatCannotGiveThePasswordStopsTheStart: a secret missing,
// denied, undecryptable or without its "password" key stops the worker's
// start with an error naming its ARN; one out of reach for now (the
// network, throttling) does not, for its later reads stay for now.
func TestASecretThatCannotGiveThePasswordStopsTheStart(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wrong-AbCdEf"
	for _, tc := range []struct {
		name   string
		answer secrets
		stops  bool
	}{
		{"the password", secrets{value: `{"password":"p"}`}, false},
		{"no such secret", secrets{err: &types.ResourceNotFoundException{Message: aws.String("Secrets Manager can't find the specified secret.")}}, true},
		{"access denied", secrets{err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}}, true},
		{"its KMS key refused", secrets{err: &types.DecryptionFailure{}}, true},
		{"marked for deletion", secrets{err: &types.InvalidRequestException{}}, true},
		{"no password key", secrets{value: `{"pass":"p"}`}, true},
		{"not JSON", secrets{value: `p`}, true},
		{"throttled", secrets{err: &smithy.GenericAPIError{Code: "ThrottlingException"}}, false},
		{"out of reach", secrets{err: errors.New("dial tcp: connection refused")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"CACHE_ENDPOINT": "127.0.0.1:1", "CACHE_USERNAME": "invalidator", "CACHE_PASSWORD_SECRET_ARN": arn}
			cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			cfg.Cache.PasswordSecret.Read = SecretPassword(tc.answer)
			w, err := Start("test", cfg, nil)
			if w != nil {
				defer w.Close()
			}
			switch {
			case tc.stops && (err == nil || !strings.Contains(err.Error(), "CACHE_PASSWORD_SECRET_ARN="+arn)):
				t.Fatalf("Start: %v, want an error naming the secret's ARN", err)
			case !tc.stops && err != nil:
				t.Fatalf("Start: %v, want it started", err)
			}
		})
	}
}
