package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/native"
)

var (
	// ErrLocked is returned by TryLock when someone else holds the lock.
	ErrLocked = errors.New("lock: held by another owner")
	// ErrLockLost is returned by Release and Extend when the lock expired
	// and may belong to someone else now.
	ErrLockLost = errors.New("lock: lost")

	errShortTTL = errors.New("lock: a lock lives at least 1 ms")
)

// Lock is a lock on one key held by one owner until it expires or is
// released. It is a lease: work under it must finish within its TTL, or
// extend it.
type Lock struct {
	client valkey.Client
	key    string
	token  string
}

// TryLock takes the lock key for ttl with SET NX PX and a random token, or
// returns ErrLocked.
func TryLock(ctx context.Context, client valkey.Client, key string, ttl time.Duration) (*Lock, error) {
	if ttl < time.Millisecond {
		return nil, errShortTTL
	}
	token := rand.Text()[:16]
	err := client.Do(ctx, client.B().Set().Key(key).Value(token).Nx().Px(ttl).Build()).Error()
	if valkey.IsValkeyNil(err) {
		return nil, ErrLocked
	}
	if err != nil {
		return nil, err
	}
	return &Lock{client: client, key: key, token: token}, nil
}

// releaseScript deletes the lock only while it holds our token: DELIFEQ,
// where the engine has it (native).
var releaseScript = valkey.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// extendScript resets the lock's lifetime only while it holds our token:
// SET … IFEQ … PX, where the engine has it.
var extendScript = valkey.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)

// Release gives the lock up; ErrLockLost when it was no longer ours.
func (l *Lock) Release(ctx context.Context) error {
	if native.Has(ctx, l.client) {
		n, err := l.client.Do(ctx, l.client.B().Delifeq().Key(l.key).Value(l.token).Build()).AsInt64()
		if !native.Refused(err) {
			return l.ours(n, err)
		}
	}
	return l.ours(releaseScript.Exec(ctx, l.client, []string{l.key}, []string{l.token}).AsInt64())
}

// Extend gives the lock a new lifetime of ttl from now; ErrLockLost when it
// was no longer ours.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return errShortTTL // PEXPIRE 0 would delete the lock and report success
	}
	if native.Has(ctx, l.client) {
		err := l.client.Do(ctx, l.client.B().Set().Key(l.key).Value(l.token).Ifeq(l.token).Px(ttl).Build()).Error()
		switch {
		case valkey.IsValkeyNil(err):
			return ErrLockLost
		case !native.Refused(err):
			return err
		}
	}
	return l.ours(extendScript.Exec(ctx, l.client, []string{l.key}, []string{l.token, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64())
}

func (l *Lock) ours(n int64, err error) error {
	switch {
	case err != nil:
		return err
	case n == 0:
		return ErrLockLost
	default:
		return nil
	}
}
