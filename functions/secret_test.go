package functions

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// rereadAfter is more than elasticache's second between two reads of a
// password's secret.
const rereadAfter = 1100 * time.Millisecond

// TestAPasswordRotationParksNothing: the SQS function reads its cache
// password by the ARN of the secret that holds it (in moto), as
// template.yaml has it. The secret rotated, the cache user's password
// changed and its connections killed, the next invoke's connections are
// refused the old password, the function reads the secret again, and the
// invoke's keys are deleted: nothing fails, nothing is parked.
func TestAPasswordRotationParksNothing(t *testing.T) {
	admin := testenv.Cache(t)
	sm := awsenv.SecretsManager(t)
	before, after := rand.Text(), rand.Text()
	user := testenv.User(t, admin, "rotation-", "on", ">"+before, "~cache:*", "&*", "+@all")
	secretString := func(password string) *string {
		b, _ := json.Marshal(map[string]string{"password": password})
		return aws.String(string(b))
	}
	name := "test-cache-password-" + strings.ToLower(rand.Text()[:8])
	secret, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: secretString(before)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: secret.ARN, ForceDeleteWithoutRecovery: aws.Bool(true)})
	})

	cfg := testenv.WorkerCacheConfig(t)
	cfg.Username, cfg.Password, cfg.PasswordSecret = user, "", &elasticache.PasswordSecret{ARN: aws.ToString(secret.ARN)}
	failures, env := failureQueue(t)
	fn := emulator(t, "sqs-invalidate", cfg, rie.Options{Env: env})
	ns := rand.Text()
	invalidate := func(id string) {
		t.Helper()
		key := "cache:product:" + ns + id
		setKeys(t, admin, key)
		ev := lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{sqsMessage(id, `{"entity":"product","id":"`+ns+id+`"}`)}}
		if failed := batchFailures(t, fn, ev); len(failed) != 0 {
			t.Fatalf("%s: batch item failures %q, want none", id, failed)
		}
		requireGone(t, admin, key)
	}
	invalidate("before")
	// The secret is read again a second after its last read at the
	// soonest: that second passes before the rotation, so that the next
	// connection reads the new password at once, and the batch's keys need
	// not be retried for as long (1 s, the worker's RetryFor).
	time.Sleep(rereadAfter)

	if _, err := sm.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: secret.ARN, SecretString: secretString(after)}); err != nil {
		t.Fatal(err)
	}
	testenv.OnEveryNode(t, admin, "ACL", "SETUSER", user, "resetpass", ">"+after)
	testenv.OnEveryNode(t, admin, "CLIENT", "KILL", "USER", user)
	invalidate("after")
	if n := messages(t, failures); n != 0 {
		t.Fatalf("%d records parked, want none", n)
	}
}

// missingSecretARN names a secret moto does not hold.
const missingSecretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:no-such-password-AbCdEf"

// TestThePollerStopsOnASecretThatIsNotThere: a CACHE_PASSWORD_SECRET_ARN
// that names no secret stops the poller at start, non-zero, naming the
// ARN, instead of failing every record for now until the DLQ.
func TestThePollerStopsOnASecretThatIsNotThere(t *testing.T) {
	awsenv.SecretsManager(t) // moto is up: the ARN is the only fault
	cfg := testenv.WorkerCacheConfig(t)
	cfg.Password, cfg.PasswordSecret = "", &elasticache.PasswordSecret{ARN: missingSecretARN}
	cmd := exec.Command(binary("poller"))
	cmd.Env = append(append(os.Environ(), cfg.Env()...), "QUEUE_URL=http://127.0.0.1:1/123456789012/none", "HEALTH_ADDR=off")
	done := make(chan error, 1)
	var out testenv.Log
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(out.String(), "CACHE_PASSWORD_SECRET_ARN="+missingSecretARN) {
			t.Fatalf("the poller ended (%v) with:\n%s\nwant a non-zero exit naming the secret's ARN", err, out.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the poller still runs 10 s on:\n%s", out.String())
	}
}
