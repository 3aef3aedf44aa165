package elasticache

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/env"
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
	// certificates chain to; for any other the system roots. For AWS the
	// system pool is never loaded, which would slow every cold start.
	CAFile string
	// Username and Password log in as an ACL user (CACHE_USERNAME,
	// CACHE_PASSWORD, default none: the server's default user).
	Username string
	Password string
	// PasswordSecret, when set (CACHE_PASSWORD_SECRET_ARN, with
	// CACHE_USERNAME, default none), gives the password instead of
	// Password: the one a secret holds, read again when the cache refuses
	// it. The caller fills in its Read.
	PasswordSecret *PasswordSecret
	// IAM, when set (CACHE_IAM_AUTH=true, with CACHE_NAME and
	// CACHE_USERNAME, default off), logs in with IAM tokens instead of a
	// password. The caller fills in its Region and Credentials.
	IAM *IAM
	// ReplicaReads lets read-only commands be served by replicas
	// (CACHE_REPLICA_READS, default false): valkey-go sends them to the
	// replicas (READONLY); on ElastiCache Serverless, point Endpoint at
	// port 6380, whose reads replicas serve. Off, an endpoint on port 6380
	// is refused, so that no service reads replicas by mistake. A replica
	// is behind its primary by its replication lag, and a read there may
	// return a value for that long after its invalidation has finished:
	// outside the invalidator's promise (docs/operations.md, "When
	// something fails"). writethrough needs the primary: give it a client
	// without ReplicaReads.
	ReplicaReads bool
	// ConnLifetime closes each connection this long after it opened, and
	// the client opens another (CACHE_CONN_LIFETIME, a Go duration).
	// Default: 11h with IAM, as ElastiCache drops IAM-authenticated
	// connections at 12h; otherwise none.
	ConnLifetime time.Duration
}

// ConfigFromEnv reads the configuration from environment variables through getenv
// (os.Getenv in production) and validates it.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Endpoint: env.String(getenv, "CACHE_ENDPOINT"),
		CAFile:   env.String(getenv, "CACHE_CA_FILE"),
		Username: env.String(getenv, "CACHE_USERNAME"),
		Password: env.String(getenv, "CACHE_PASSWORD"),
	}
	if arn := env.String(getenv, "CACHE_PASSWORD_SECRET_ARN"); arn != "" {
		c.PasswordSecret = &PasswordSecret{ARN: arn}
	}
	var err error
	if c.TLS, err = env.Bool(getenv, "CACHE_TLS", true); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.ReplicaReads, err = env.Bool(getenv, "CACHE_REPLICA_READS", false); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	iam, err := env.Bool(getenv, "CACHE_IAM_AUTH", false)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if iam {
		c.IAM = &IAM{CacheName: env.String(getenv, "CACHE_NAME")}
		if c.IAM.NodeBased, err = env.Bool(getenv, "CACHE_NODE_BASED", false); err != nil {
			return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if c.ConnLifetime, err = env.Duration(getenv, "CACHE_CONN_LIFETIME", 0, time.Second, 0); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, c.Validate()
}

// Env is the environment that ConfigFromEnv reads back as this configuration,
// for starting a worker binary with it. IAM settings are not carried.
func (c Config) Env() []string {
	arn := ""
	if c.PasswordSecret != nil {
		arn = c.PasswordSecret.ARN
	}
	return []string{
		"CACHE_ENDPOINT=" + c.Endpoint, "CACHE_TLS=" + strconv.FormatBool(c.TLS), "CACHE_CA_FILE=" + c.CAFile,
		"CACHE_USERNAME=" + c.Username, "CACHE_PASSWORD=" + c.Password, "CACHE_PASSWORD_SECRET_ARN=" + arn,
		"CACHE_REPLICA_READS=" + strconv.FormatBool(c.ReplicaReads),
	}
}

// replicaPort is ElastiCache Serverless's endpoint of reads from replicas.
const replicaPort = "6380"

// Validate reports the first problem that would stop a connection, or
// would read replicas unasked.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return fmt.Errorf("%w: CACHE_ENDPOINT is required (host:port)", ErrConfig)
	}
	_, port, err := net.SplitHostPort(c.Endpoint)
	if err != nil || port == "" {
		return fmt.Errorf("%w: CACHE_ENDPOINT=%q is not host:port", ErrConfig, c.Endpoint)
	}
	if port == replicaPort && !c.ReplicaReads {
		return fmt.Errorf("%w: CACHE_ENDPOINT=%q: port %s serves reads from replicas, which may return a value after its invalidation has finished; use 6379, or set CACHE_REPLICA_READS=true", ErrConfig, c.Endpoint, replicaPort)
	}
	if c.CAFile != "" && !c.TLS {
		return fmt.Errorf("%w: CACHE_CA_FILE is set but CACHE_TLS is false", ErrConfig)
	}
	if c.Password != "" && c.Username == "" {
		return fmt.Errorf("%w: CACHE_PASSWORD needs CACHE_USERNAME", ErrConfig)
	}
	if c.PasswordSecret != nil {
		switch {
		case c.Username == "":
			return fmt.Errorf("%w: CACHE_PASSWORD_SECRET_ARN needs CACHE_USERNAME", ErrConfig)
		case c.Password != "":
			return fmt.Errorf("%w: set CACHE_PASSWORD or CACHE_PASSWORD_SECRET_ARN, not both", ErrConfig)
		case c.IAM != nil:
			return fmt.Errorf("%w: set CACHE_PASSWORD_SECRET_ARN or CACHE_IAM_AUTH, not both", ErrConfig)
		}
	}
	if c.IAM != nil {
		switch {
		case !c.TLS:
			return fmt.Errorf("%w: IAM authentication needs TLS", ErrConfig)
		case c.IAM.CacheName == "":
			return fmt.Errorf("%w: CACHE_IAM_AUTH needs CACHE_NAME, the cache's name (or replication group ID)", ErrConfig)
		case c.Username == "":
			return fmt.Errorf("%w: CACHE_IAM_AUTH needs CACHE_USERNAME, the ElastiCache user ID", ErrConfig)
		case c.Password != "":
			return fmt.Errorf("%w: set CACHE_PASSWORD or CACHE_IAM_AUTH, not both", ErrConfig)
		}
	}
	return nil
}
