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
// first connection opens and kept; a later connection — made after one was
// lost or refused, a rotation among the causes — reads it again once the
// last read is a second old, so that a rotated password reaches the next
// connection whatever refused the old one, and a storm of reconnects costs
// one read a second.
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
	read     bool          // whether a read succeeded
	ended    time.Time     // when the last read ended, failed or not
	err      error         // its error
	reading  chan struct{} // closed when the read in flight ends; nil when none
}

// rereadEvery bounds the reads of a secret: connections made within a
// second of a read share it.
const rereadEvery = time.Second

func (s *PasswordSecret) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// current returns the password to log in with, read anew unless the last
// read ended less than a second ago. One read at a time: connections made
// meanwhile wait for it, without holding the lock through its I/O.
func (s *PasswordSecret) current() (string, error) {
	s.mu.Lock()
	for s.reading != nil {
		wait := s.reading
		s.mu.Unlock()
		<-wait
		s.mu.Lock()
	}
	if s.ended.IsZero() || s.clock().Sub(s.ended) >= rereadEvery {
		s.reading = make(chan struct{})
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		password, err := s.Read(ctx, s.ARN)
		cancel()
		s.mu.Lock()
		s.ended, s.err = s.clock(), err
		if err == nil {
			s.password, s.read = password, true
		}
		close(s.reading)
		s.reading = nil
	}
	defer s.mu.Unlock()
	if !s.read {
		return "", fmt.Errorf("%w: the password of secret %s: %w", cacheerr.ErrCredentials, s.ARN, s.err)
	}
	return s.password, nil
}

// credentialsFn gives every new connection the secret's password.
func (s *PasswordSecret) credentialsFn(user string) func(valkey.AuthCredentialsContext) (valkey.AuthCredentials, error) {
	return func(valkey.AuthCredentialsContext) (valkey.AuthCredentials, error) {
		password, err := s.current()
		return valkey.AuthCredentials{Username: user, Password: password}, err
	}
}
