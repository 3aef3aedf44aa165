package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/serverinfo"
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

// TestLockRunsTheEnginesOwnCommands: on Valkey 9, Extend and Release send
// SET … IFEQ and DELIFEQ, which the server ran (INFO commandstats), and no
// script; on an older engine, the scripts.
func TestLockRunsTheEnginesOwnCommands(t *testing.T) {
	client := testenv.Cache(t)
	server, err := serverinfo.Of(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	name, version, _ := strings.Cut(server, " ")
	major, _, _ := strings.Cut(version, ".")
	n, _ := strconv.Atoi(major)
	nine := name == "valkey" && n >= 9
	rec := &recorder{Client: client}
	before := calls(t, client, "delifeq")
	l, err := TryLock(t.Context(), rec, "lock:test:"+rand.Text(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(t.Context(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	sent := strings.Join(rec.sent, " ")
	switch {
	case nine && (!strings.Contains(sent, "DELIFEQ") || !strings.Contains(sent, "SET+IFEQ") || strings.Contains(sent, "EVAL")):
		t.Errorf("on %s the lock sent %s: want SET … IFEQ and DELIFEQ, no script", server, sent)
	case nine && calls(t, client, "delifeq") <= before:
		t.Errorf("on %s the server ran no DELIFEQ (INFO commandstats)", server)
	case !nine && (strings.Contains(sent, "DELIFEQ") || strings.Contains(sent, "IFEQ") || !strings.Contains(sent, "EVAL")):
		t.Errorf("on %s the lock sent %s: want the scripts", server, sent)
	}
	t.Logf("%s: %s", server, sent)
}

// recorder is a client that notes each command it sends: its name, and
// SET's with IFEQ when it has it.
type recorder struct {
	valkey.Client
	sent []string
}

func (r *recorder) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	args := cmd.Commands()
	name := args[0]
	if name == "SET" && slices.Contains(args, "IFEQ") {
		name = "SET+IFEQ"
	}
	r.sent = append(r.sent, name)
	return r.Client.Do(ctx, cmd)
}

// calls is how many times the cache's nodes have run command.
func calls(t *testing.T, client valkey.Client, command string) int {
	t.Helper()
	n := 0
	for _, node := range client.Nodes() {
		info, err := node.Do(t.Context(), node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls="); ok {
				c, _, _ := strings.Cut(rest, ",")
				v, _ := strconv.Atoi(c)
				n += v
			}
		}
	}
	return n
}
