package elasticache

import (
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// ClientOption turns the configuration into valkey-go options: where to
// connect, TLS, the login, the connection lifetime, replica reads only when
// asked, and client-side caching off. The rest is valkey-go's defaults, for the caller to tune.
func (c Config) ClientOption() (valkey.ClientOption, error) {
	if err := c.Validate(); err != nil {
		return valkey.ClientOption{}, err
	}
	opt := valkey.ClientOption{
		InitAddress:  []string{c.Endpoint},
		Username:     c.Username,
		Password:     c.Password,
		ConnLifetime: c.ConnLifetime,
		// valkey-go's client-side caching sends CLIENT TRACKING at connect,
		// which a least-privilege ACL user may not run: with it on, such a
		// user could not connect at all. Turn it on in the options if wanted.
		DisableCache: true,
	}
	if c.ReplicaReads {
		opt.SendToReplicas = func(cmd valkey.Completed) bool { return cmd.IsReadOnly() }
	}
	if c.PasswordSecret != nil {
		if c.PasswordSecret.Read == nil {
			return valkey.ClientOption{}, fmt.Errorf("%w: CACHE_PASSWORD_SECRET_ARN without a way to read the secret", ErrConfig)
		}
		opt.AuthCredentialsFn = c.PasswordSecret.credentialsFn(c.Username)
	}
	if c.IAM != nil {
		if c.IAM.Credentials == nil {
			return valkey.ClientOption{}, fmt.Errorf("%w: IAM authentication without AWS credentials", ErrConfig)
		}
		opt.Password = ""
		opt.AuthCredentialsFn = c.IAM.credentialsFn(c.Username)
		if opt.ConnLifetime == 0 {
			opt.ConnLifetime = iamConnLifetime
		}
	}
	if c.TLS {
		cfg, err := c.tlsConfig()
		if err != nil {
			return valkey.ClientOption{}, err
		}
		opt.TLSConfig = cfg
	}
	return opt, nil
}

// amazonRoots are the roots of every certificate ElastiCache serves.
//
//go:embed amazon-roots.pem
var amazonRoots []byte

func (c Config) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	pem := amazonRoots
	switch host, _, _ := net.SplitHostPort(c.Endpoint); {
	case c.CAFile != "":
		var err error
		if pem, err = os.ReadFile(c.CAFile); err != nil {
			return nil, fmt.Errorf("%w: CACHE_CA_FILE: %w", ErrConfig, err)
		}
	case !strings.HasSuffix(host, ".amazonaws.com") && !strings.HasSuffix(host, ".amazonaws.com.cn"):
		return cfg, nil // the system roots
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: CACHE_CA_FILE=%s holds no PEM certificate", ErrConfig, c.CAFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// New connects to the cache. It fails when no node answers or the login is
// refused, so a wrong configuration shows at start-up, not at the first
// event. To tune valkey-go's options, start from ClientOption instead.
func New(c Config) (valkey.Client, error) {
	opt, err := c.ClientOption()
	if err != nil {
		return nil, err
	}
	client, err := valkey.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connect to cache %s: %w", c.Endpoint, err)
	}
	return client, nil
}
