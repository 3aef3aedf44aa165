package worker

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// TestAProbeRefusedItsLoginSaysTheCacheIsNotThere: while the password
// rotates — the user's password changed, the secret not yet — the cache
// refuses every new connection (WRONGPASS), and the probe must not call
// that an answer: the poller would go on receiving and handing every
// message back, towards the DLQ. Once the secret holds the new password,
// the probe passes.
func TestAProbeRefusedItsLoginSaysTheCacheIsNotThere(t *testing.T) {
	admin := testenv.Cache(t)
	before, after := rand.Text(), rand.Text()
	user := testenv.User(t, admin, "probe-", "on", ">"+before, "~cache:*", "+@all")
	var secret atomic.Value
	secret.Store(before)
	cfg := testenv.WorkerCacheConfig(t)
	cfg.Username, cfg.Password = user, ""
	cfg.PasswordSecret = &elasticache.PasswordSecret{ARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:probe",
		Read: func(context.Context, string) (string, error) { return secret.Load().(string), nil }}
	w, err := Start("poller", Config{Cache: cfg, Rules: invalidate.DefaultRules()}, &queuestest.SQS{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Probe(t.Context()); err != nil {
		t.Fatalf("probe before the rotation: %v", err)
	}
	testenv.OnEveryNode(t, admin, "ACL", "SETUSER", user, "resetpass", ">"+after)
	testenv.OnEveryNode(t, admin, "CLIENT", "KILL", "USER", user)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := w.Probe(ctx); err == nil {
		t.Fatal("the probe passed while the cache refused the login: the poller would hand every message back until the DLQ")
	}
	secret.Store(after)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := w.Probe(t.Context()); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the probe still fails with the secret rotated too: %v", err)
		}
	}
}
