package elasticache

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

func getenvOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr string
	}{
		{
			name: "defaults to TLS",
			env:  map[string]string{"CACHE_ENDPOINT": "cache.example:6379"},
			want: Config{Endpoint: "cache.example:6379", TLS: true},
		},
		{
			name: "ACL user and extra CA",
			env: map[string]string{
				"CACHE_ENDPOINT": "127.0.0.1:7001", "CACHE_CA_FILE": "/tmp/ca.crt",
				"CACHE_USERNAME": "app", "CACHE_PASSWORD": "secret",
			},
			want: Config{Endpoint: "127.0.0.1:7001", TLS: true, CAFile: "/tmp/ca.crt", Username: "app", Password: "secret"},
		},
		{
			name: "plaintext only when asked",
			env:  map[string]string{"CACHE_ENDPOINT": "localhost:6379", "CACHE_TLS": "false"},
			want: Config{Endpoint: "localhost:6379"},
		},
		{
			name: "connection lifetime",
			env:  map[string]string{"CACHE_ENDPOINT": "h:1", "CACHE_CONN_LIFETIME": "6h"},
			want: Config{Endpoint: "h:1", TLS: true, ConnLifetime: 6 * time.Hour},
		},
		{
			name: "replica reads when asked",
			env:  map[string]string{"CACHE_ENDPOINT": "c.serverless.use1.cache.amazonaws.com:6380", "CACHE_REPLICA_READS": "true"},
			want: Config{Endpoint: "c.serverless.use1.cache.amazonaws.com:6380", TLS: true, ReplicaReads: true},
		},
		{
			name:    "the replicas' port unasked",
			env:     map[string]string{"CACHE_ENDPOINT": "c.serverless.use1.cache.amazonaws.com:6380"},
			wantErr: "CACHE_REPLICA_READS",
		},
		{name: "lifetime not a duration", env: map[string]string{"CACHE_ENDPOINT": "h:1", "CACHE_CONN_LIFETIME": "6"}, wantErr: "CACHE_CONN_LIFETIME"},
		{name: "endpoint missing", env: map[string]string{}, wantErr: "CACHE_ENDPOINT is required"},
		{name: "endpoint without port", env: map[string]string{"CACHE_ENDPOINT": "cache.example"}, wantErr: "is not host:port"},
		{name: "TLS not a bool", env: map[string]string{"CACHE_ENDPOINT": "h:1", "CACHE_TLS": "yes please"}, wantErr: "CACHE_TLS"},
		{
			name:    "CA without TLS",
			env:     map[string]string{"CACHE_ENDPOINT": "h:1", "CACHE_TLS": "false", "CACHE_CA_FILE": "/ca"},
			wantErr: "CACHE_CA_FILE is set but CACHE_TLS is false",
		},
		{
			name:    "password without user",
			env:     map[string]string{"CACHE_ENDPOINT": "h:1", "CACHE_PASSWORD": "p"},
			wantErr: "CACHE_PASSWORD needs CACHE_USERNAME",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigFromEnv(getenvOf(tt.env))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrConfig containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClientOptionCAFile(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"missing": filepath.Join(dir, "nope.pem"), "not PEM": notPEM} {
		t.Run(name, func(t *testing.T) {
			_, err := Config{Endpoint: "h:1", TLS: true, CAFile: file}.ClientOption()
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}

func TestClientOptionTLS(t *testing.T) {
	opt, err := Config{Endpoint: "h:1", TLS: true}.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	if opt.TLSConfig == nil {
		t.Fatal("TLS config missing")
	}
	opt, err = Config{Endpoint: "h:1"}.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	if opt.TLSConfig != nil {
		t.Fatal("TLS on although the config turned it off")
	}
}

func TestIAMConfig(t *testing.T) {
	good := map[string]string{"CACHE_ENDPOINT": "c.serverless.use1.cache.amazonaws.com:6379", "CACHE_IAM_AUTH": "true",
		"CACHE_NAME": "orders", "CACHE_USERNAME": "invalidator"}
	c, err := ConfigFromEnv(getenvOf(good))
	if err != nil || c.IAM == nil || c.IAM.CacheName != "orders" {
		t.Fatalf("config = %+v, %v", c, err)
	}
	if _, err := c.ClientOption(); !errors.Is(err, ErrConfig) {
		t.Fatalf("options without credentials: err = %v, want ErrConfig", err)
	}
	for key, value := range map[string]string{"CACHE_NAME": "", "CACHE_USERNAME": "", "CACHE_TLS": "false", "CACHE_PASSWORD": "p", "CACHE_IAM_AUTH": "sure"} {
		bad := maps.Clone(good)
		bad[key] = value
		if _, err := ConfigFromEnv(getenvOf(bad)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s=%q: err = %v, want ErrConfig", key, value, err)
		}
	}
}

func TestIAMToken(t *testing.T) {
	iam := IAM{
		CacheName: "orders",
		Region:    "eu-west-1",
		// A provider of the SDK's core, not its credentials module: this
		// package's tests must not pull the SDK's credential chain into
		// the go.sum of the services that import it.
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, nil
		}),
		Now: func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) },
	}
	token, err := iam.Token(t.Context(), "invalidator")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse("http://" + token)
	if err != nil || strings.HasPrefix(token, "http") {
		t.Fatalf("token %q: want a URL without its scheme (%v)", token, err)
	}
	q := u.Query()
	for key, want := range map[string]string{
		"Action": "connect", "User": "invalidator", "ResourceType": "ServerlessCache", "X-Amz-Expires": "900",
		"X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Date": "20261129T120000Z",
		"X-Amz-Credential": "AKIDEXAMPLE/20261129/eu-west-1/elasticache/aws4_request", "X-Amz-SignedHeaders": "host",
	} {
		if got := q.Get(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if u.Host != "orders" || len(q.Get("X-Amz-Signature")) != 64 {
		t.Errorf("token %q: want host orders and a signature", token)
	}
	again, _ := iam.Token(t.Context(), "invalidator")
	if again != token {
		t.Error("the same inputs signed differently")
	}
	// ElastiCache keeps names and user IDs lowercased; so does the token.
	typed := iam
	typed.CacheName = "Orders"
	if mixed, _ := typed.Token(t.Context(), "Invalidator"); mixed != token {
		t.Errorf("Orders/Invalidator signed as %q, want the lowercased %q", mixed, token)
	}
	// The credentials' source failing (IMDS or ECS answering 500) is no
	// answer of the cache: it may pass.
	broken := iam
	broken.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("failed to refresh cached credentials, StatusCode: 500")
	})
	if _, err := broken.credentialsFn("invalidator")(valkey.AuthCredentialsContext{}); !errors.Is(err, cacheerr.ErrCredentials) || !cacheerr.Transient(err) {
		t.Errorf("a credentials source failing gave %v: want ErrCredentials, which may pass", err)
	}
	nodes := iam
	nodes.NodeBased = true
	nodeToken, _ := nodes.Token(t.Context(), "invalidator")
	if u, _ := url.Parse("http://" + nodeToken); u.Query().Has("ResourceType") {
		t.Errorf("node-based token %q has a ResourceType", nodeToken)
	}
}

func TestEnvRoundTrip(t *testing.T) {
	want := Config{Endpoint: "127.0.0.1:7001", TLS: true, CAFile: "/ca.crt", Username: "app", Password: "p", ReplicaReads: true}
	vars := map[string]string{}
	for _, kv := range want.Env() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if got, err := ConfigFromEnv(getenvOf(vars)); err != nil || got != want {
		t.Fatalf("ConfigFromEnv(Env()) = %+v, %v; want %+v", got, err, want)
	}
}

func TestRootsByEndpoint(t *testing.T) {
	for endpoint, amazon := range map[string]bool{
		"my-cache-abc123.serverless.use1.cache.amazonaws.com:6379": true,
		"cache.example.com:6379":                                   false,
	} {
		opt, err := Config{Endpoint: endpoint, TLS: true}.ClientOption()
		if err != nil {
			t.Fatal(err)
		}
		if got := opt.TLSConfig.RootCAs != nil; got != amazon {
			t.Errorf("%s: built-in Amazon roots = %v, want %v", endpoint, got, amazon)
		}
	}
}

func TestPasswordSecretFromEnv(t *testing.T) {
	base := map[string]string{"CACHE_ENDPOINT": "h:1", "CACHE_USERNAME": "app", "CACHE_PASSWORD_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:pw"}
	c, err := ConfigFromEnv(getenvOf(base))
	if err != nil || c.PasswordSecret == nil || c.PasswordSecret.ARN != base["CACHE_PASSWORD_SECRET_ARN"] || c.Password != "" {
		t.Fatalf("config %+v, %v: want the secret's ARN, no password", c, err)
	}
	if _, err := c.ClientOption(); !errors.Is(err, ErrConfig) {
		t.Errorf("a secret nobody reads: %v, want ErrConfig", err)
	}
	for key, value := range map[string]string{"CACHE_USERNAME": "", "CACHE_PASSWORD": "p", "CACHE_IAM_AUTH": "true"} {
		e := maps.Clone(base)
		e[key], e["CACHE_NAME"] = value, "c"
		if _, err := ConfigFromEnv(getenvOf(e)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "CACHE_PASSWORD_SECRET_ARN") {
			t.Errorf("%s=%q: %v, want ErrConfig naming CACHE_PASSWORD_SECRET_ARN", key, value, err)
		}
	}
}

// TestASecretIsReadAgainForANewConnection: the password is read at the
// first connection and kept by those made within a second; a connection
// made later reads it again, so that a rotated password reaches it; a read
// that fails is a failure for now, of the credentials.
func TestASecretIsReadAgainForANewConnection(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	held, reads := "p1", 0
	s := &PasswordSecret{ARN: "arn:pw", now: func() time.Time { return now },
		Read: func(_ context.Context, arn string) (string, error) {
			reads++
			return held, nil
		}}
	creds := s.credentialsFn("app")
	login := func(want string, wantReads int) {
		t.Helper()
		c, err := creds(valkey.AuthCredentialsContext{})
		if err != nil || c.Username != "app" || c.Password != want || reads != wantReads {
			t.Fatalf("login %+v, %v after %d reads: want %s after %d", c, err, reads, want, wantReads)
		}
	}
	login("p1", 1)
	login("p1", 1) // within the second: kept
	held = "p2"    // rotated
	now = now.Add(time.Second)
	login("p2", 2)
	held = "p3"
	login("p2", 2) // read less than a second ago
	now = now.Add(time.Second)
	login("p3", 3)

	fresh := &PasswordSecret{ARN: "arn:pw", now: func() time.Time { return now },
		Read: func(context.Context, string) (string, error) { reads++; return "", errors.New("AccessDeniedException") }}
	reads = 0
	for range 2 {
		if _, err := fresh.credentialsFn("app")(valkey.AuthCredentialsContext{}); !errors.Is(err, cacheerr.ErrCredentials) || !cacheerr.Transient(err) || reads != 1 {
			t.Fatalf("a read that fails: %v after %d reads, want a failure for now of the credentials, read once a second", err, reads)
		}
	}
}

// TestConnectionsShareOneRead: connections made at once, one per node,
// share one read of the secret, and none waits on another's lock while it
// runs.
func TestConnectionsShareOneRead(t *testing.T) {
	var reads atomic.Int32
	release := make(chan struct{})
	s := &PasswordSecret{ARN: "arn:pw", Read: func(context.Context, string) (string, error) {
		reads.Add(1)
		<-release
		return "p", nil
	}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if c, err := s.credentialsFn("app")(valkey.AuthCredentialsContext{}); err != nil || c.Password != "p" {
				t.Errorf("login %+v, %v", c, err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // every login waiting on the one read
	close(release)
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads for 4 connections made at once, want 1", n)
	}
}
