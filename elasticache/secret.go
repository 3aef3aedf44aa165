package elasticache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// PasswordSecret is a password kept in a secret — in AWS, Secrets
// Manager's — instead of the environment, where a function's configuration
// would show it and a rotation would not reach it. It is read when the
// first connection opens and kept; once the cache refuses it (WRONGPASS,
// NOAUTH: the secret rotated), the next connection reads it again, at most
// once a second.
type PasswordSecret struct {
	// ARN names the secret (CACHE_PASSWORD_SECRET_ARN).
	ARN string
	// Read returns the password the secret holds now. The caller fills it
	// in: this package reads no secret store itself, so that a service
	// importing it links no AWS client.
	Read func(ctx context.Context, arn string) (string, error)

	now      func() time.Time // time.Now; a test's clock
	mu       sync.Mutex
	password string
	read     time.Time // when password was read; zero until it was
	tried    time.Time // the last read, failed or not
	err      error     // its error
	refused  bool      // the cache refused password
}

// rereadEvery bounds the reads of a secret while the cache refuses what it
// holds: a password that stays wrong costs one read a second, not one a
// connection attempt.
const rereadEvery = time.Second

// current returns the password to log in with: the one read, or the
// secret's anew when none was read yet or the cache refused it and the
// last read is a second old.
func (s *PasswordSecret) current() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	if (s.read.IsZero() || s.refused) && (s.tried.IsZero() || now.Sub(s.tried) >= rereadEvery) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.tried = now
		var password string
		if password, s.err = s.Read(ctx, s.ARN); s.err == nil {
			s.password, s.read, s.refused = password, now, false
		}
	}
	if s.read.IsZero() {
		return "", fmt.Errorf("%w: the password of secret %s: %w", cacheerr.ErrCredentials, s.ARN, s.err)
	}
	return s.password, nil
}

// check tells the secret of an error of the cache's: a refused login has
// the next connection read the secret again.
func (s *PasswordSecret) check(err error) {
	if cacheerr.Auth(err) {
		s.mu.Lock()
		s.refused = true
		s.mu.Unlock()
	}
}

// credentialsFn gives every new connection the secret's password.
func (s *PasswordSecret) credentialsFn(user string) func(valkey.AuthCredentialsContext) (valkey.AuthCredentials, error) {
	return func(valkey.AuthCredentialsContext) (valkey.AuthCredentials, error) {
		password, err := s.current()
		return valkey.AuthCredentials{Username: user, Password: password}, err
	}
}

// watched is a client that tells its password's secret of every error its
// commands meet, so that a refused login reaches the secret. Do and
// DoMulti are watched, which is what the worker and writethrough send
// with; what the other methods meet is met again by the next of those.
type watched struct {
	valkey.Client
	secret *PasswordSecret
}

func (w watched) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	resp := w.Client.Do(ctx, cmd)
	w.secret.check(resp.Error())
	return resp
}

func (w watched) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	resps := w.Client.DoMulti(ctx, multi...)
	for _, resp := range resps {
		w.secret.check(resp.Error())
	}
	return resps
}
