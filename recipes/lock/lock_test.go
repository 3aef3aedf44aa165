package lock

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

func TestLock(t *testing.T) {
	client := testenv.Cache(t)
	k := "lock:test:" + rand.Text()
	l, err := TryLock(t.Context(), client, k, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(t.Context(), client, k, time.Second); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryLock: %v, want ErrLocked", err)
	}
	if err := l.Extend(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := client.Do(t.Context(), client.B().Pttl().Key(k).Build()).AsInt64(); ttl < 4000 {
		t.Fatalf("TTL after Extend = %d ms", ttl)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, ErrLockLost) {
		t.Fatalf("second Release: %v, want ErrLockLost", err)
	}
	// Someone else's lock is never released by a stale owner.
	other, err := TryLock(t.Context(), client, k, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(t.Context(), time.Second); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Extend of a lost lock: %v", err)
	}
	_ = other.Release(t.Context())
}

func TestShortTTLsAreRefused(t *testing.T) {
	client := testenv.Cache(t)
	if _, err := TryLock(t.Context(), client, "lock:test:"+rand.Text(), time.Microsecond); !errors.Is(err, errShortTTL) {
		t.Fatalf("TryLock for 1 µs: %v, want errShortTTL", err)
	}
}
