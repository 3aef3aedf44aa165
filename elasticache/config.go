package cacheconn

import (
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// ErrConfig marks a configuration that cannot work; start-up stops on it.
var ErrConfig = errors.New("cache configuration")

// Config says where the cache is and how to log in. The zero value is not
// usable: Endpoint is required.
type Config struct {
	// Endpoint is the host:port of the cache (CACHE_ENDPOINT). Required. One
	// address is enough: the client discovers the other cluster nodes.
	Endpoint string
	// TLS encrypts every connection (CACHE_TLS, default true). ElastiCache
	// Serverless accepts TLS only; plaintext is for explicit local use.
	TLS bool
	// CAFile names a PEM file of the certificate authorities to trust
	// (CACHE_CA_FILE), for local stacks. Default: for an *.amazonaws.com
	// endpoint the Amazon Trust Services roots built in, which ElastiCache's
	// certificates chain to; for any other the system roots. Either way the
	// system pool is not loaded for AWS, which saves about 10 ms of cold
	// start.
	CAFile string
	// Username and Password log in as an ACL user (CACHE_USERNAME,
	// CACHE_PASSWORD, default none: the server's default user).
	Username string
	Password string
	// IAM, when set (CACHE_IAM_AUTH=true, with CACHE_NAME and
	// CACHE_USERNAME, default off), logs in with IAM tokens instead of a
	// password. The caller fills in its Region and Credentials.
	IAM *IAM
}

// FromEnv reads the configuration from environment variables through getenv
// (os.Getenv in production) and validates it.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Endpoint: getenv("CACHE_ENDPOINT"),
		TLS:      true,
		CAFile:   getenv("CACHE_CA_FILE"),
		Username: getenv("CACHE_USERNAME"),
		Password: getenv("CACHE_PASSWORD"),
	}
	var err error
	if c.TLS, err = boolEnv(getenv, "CACHE_TLS", true); err != nil {
		return Config{}, err
	}
	iam, err := boolEnv(getenv, "CACHE_IAM_AUTH", false)
	if err != nil {
		return Config{}, err
	}
	if iam {
		c.IAM = &IAM{CacheName: getenv("CACHE_NAME")}
	}
	return c, c.Validate()
}

func boolEnv(getenv func(string) string, key string, def bool) (bool, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q is not true or false", ErrConfig, key, v)
	}
	return on, nil
}

// Env is the environment that FromEnv reads back as this configuration,
// for starting a worker binary with it. IAM settings are not carried.
func (c Config) Env() []string {
	return []string{
		"CACHE_ENDPOINT=" + c.Endpoint, "CACHE_TLS=" + strconv.FormatBool(c.TLS), "CACHE_CA_FILE=" + c.CAFile,
		"CACHE_USERNAME=" + c.Username, "CACHE_PASSWORD=" + c.Password,
	}
}

// Validate reports the first problem that would stop a connection.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return fmt.Errorf("%w: CACHE_ENDPOINT is required (host:port)", ErrConfig)
	}
	if _, port, err := net.SplitHostPort(c.Endpoint); err != nil || port == "" {
		return fmt.Errorf("%w: CACHE_ENDPOINT=%q is not host:port", ErrConfig, c.Endpoint)
	}
	if c.CAFile != "" && !c.TLS {
		return fmt.Errorf("%w: CACHE_CA_FILE is set but CACHE_TLS is false", ErrConfig)
	}
	if c.Password != "" && c.Username == "" {
		return fmt.Errorf("%w: CACHE_PASSWORD needs CACHE_USERNAME", ErrConfig)
	}
	if c.IAM != nil {
		switch {
		case !c.TLS:
			return fmt.Errorf("%w: IAM authentication needs TLS", ErrConfig)
		case c.IAM.CacheName == "":
			return fmt.Errorf("%w: CACHE_IAM_AUTH needs CACHE_NAME, the serverless cache's name", ErrConfig)
		case c.Username == "":
			return fmt.Errorf("%w: CACHE_IAM_AUTH needs CACHE_USERNAME, the ElastiCache user ID", ErrConfig)
		case c.Password != "":
			return fmt.Errorf("%w: set CACHE_PASSWORD or CACHE_IAM_AUTH, not both", ErrConfig)
		}
	}
	return nil
}

// ClientOption turns the configuration into valkey-go options.
func (c Config) ClientOption() (valkey.ClientOption, error) {
	if err := c.Validate(); err != nil {
		return valkey.ClientOption{}, err
	}
	opt := valkey.ClientOption{
		InitAddress: []string{c.Endpoint},
		Username:    c.Username,
		Password:    c.Password,
		// The worker never reads cached values, so client-side caching would
		// only add CLIENT TRACKING traffic.
		DisableCache: true,
		// Its commands and replies are small: a chunk of 500 UNLINKs is about
		// 25 KiB. valkey-go's 0.5 MiB defaults cost memory and, zeroed at
		// connect, 0.4 ms of every cold start.
		ReadBufferEachConn:  64 << 10,
		WriteBufferEachConn: 64 << 10,
		// A ring slot holds one Do or DoMulti in flight on a connection; a
		// Lambda function has at most invalidate.Options.Parallel (8) of them,
		// the poller that many per receiver, and a full ring only makes the
		// next call wait. Each slot is a mutex, two conditions and a channel:
		// the default 1,024 cost 0.3 ms of every cold start, 16 next to
		// nothing.
		RingScaleEachConn: 4,
	}
	if c.IAM != nil {
		if c.IAM.Credentials == nil {
			return valkey.ClientOption{}, fmt.Errorf("%w: IAM authentication without AWS credentials", ErrConfig)
		}
		opt.Password = ""
		opt.AuthCredentialsFn = c.IAM.credentialsFn(c.Username)
		opt.ConnLifetime = iamConnLifetime
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
// refused, so a wrong configuration shows at start-up, not at the first event.
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
