package elasticache

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// IAM is how to log in to ElastiCache with IAM: a token per connection,
// signed with the process's AWS credentials.
type IAM struct {
	// CacheName is the serverless cache's name, or a node-based cache's
	// replication group ID (CACHE_NAME), which the token is signed for.
	CacheName string
	// NodeBased says the cache is a node-based replication group, not
	// serverless (CACHE_NODE_BASED, default false).
	NodeBased bool
	// Region and Credentials sign the token: take them from the AWS SDK's
	// configuration (aws.Config's Region and Credentials).
	Region      string
	Credentials aws.CredentialsProvider
	// Now tells the signing time. Default time.Now.
	Now func() time.Time
}

// SignWith gives c's IAM authentication, if it has one, the region and
// credentials its tokens are signed with: a service's own, from the AWS
// SDK's configuration, or a Lambda function's execution role. Without IAM
// it does nothing.
func (c *Config) SignWith(region string, creds aws.CredentialsProvider) {
	if c.IAM != nil {
		c.IAM.Region, c.IAM.Credentials = region, creds
	}
}

const (
	// tokenLifetime is how long ElastiCache accepts a token: a connection
	// must be opened within it, and each new one gets a fresh token.
	tokenLifetime = 15 * time.Minute
	// iamConnLifetime recycles connections before ElastiCache drops
	// IAM-authenticated ones at 12 hours.
	iamConnLifetime = 11 * time.Hour
	// emptyPayloadHash is the SHA-256 of an empty body: the token is a GET.
	emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// Token returns an IAM authentication token for user: a SigV4-presigned
// "connect" request for the cache, without its scheme, valid for 15
// minutes. The cache name and user ID are signed lowercased, as AWS's own
// samples sign them: ElastiCache keeps both in lowercase, so a name typed
// My-Cache would otherwise sign a different request than the one it checks.
func (a IAM) Token(ctx context.Context, user string) (string, error) {
	query := url.Values{
		"Action":        {"connect"},
		"User":          {strings.ToLower(user)},
		"X-Amz-Expires": {"900"},
	}
	if !a.NodeBased {
		query.Set("ResourceType", "ServerlessCache")
	}
	host := strings.ToLower(a.CacheName)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/?"+query.Encode(), nil)
	if err != nil {
		return "", err
	}
	creds, err := a.Credentials.Retrieve(ctx)
	if err != nil {
		return "", err
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, creds, req, emptyPayloadHash, "elasticache", a.Region, now().UTC())
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(signed, "http://"), nil
}

// credentialsFn gives every new connection a fresh token.
func (a IAM) credentialsFn(user string) func(valkey.AuthCredentialsContext) (valkey.AuthCredentials, error) {
	return func(valkey.AuthCredentialsContext) (valkey.AuthCredentials, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		token, err := a.Token(ctx, user)
		if err != nil {
			// The credentials' source failed (IMDS, ECS, STS): not the
			// cache, and it may pass.
			return valkey.AuthCredentials{}, fmt.Errorf("%w: IAM token: %w", cacheerr.ErrCredentials, err)
		}
		return valkey.AuthCredentials{Username: user, Password: token}, nil
	}
}
