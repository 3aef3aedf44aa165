package main

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// TestInspectConsumesOnlyItsOwnQueue: pointed at a queue of the worker's —
// by its variable, by the template's name for it, by its redrive policy,
// or as another's dead-letter queue — inspect refuses, exits non-zero and
// leaves every message where it was.
func TestInspectConsumesOnlyItsOwnQueue(t *testing.T) {
	testenv.Cache(t)
	ns := strings.ToLower(rand.Text()[:10])
	failures, _ := newQueue(t, "test-inspect-"+ns+"-parked", nil, changes(ns, 5)...)
	named, _ := newQueue(t, "test-"+ns+"-cache-invalidation-failures", nil, changes(ns, 5)...)
	dlq, dlqARN := newQueue(t, "test-inspect-"+ns+"-dlq-of-another", nil, changes(ns, 5)...)
	redriven, _ := newQueue(t, "test-inspect-"+ns+"-with-a-dlq", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":"5"}`}, changes(ns, 5)...)
	t.Setenv("FAILURE_QUEUE_URL", failures)
	for _, q := range []struct{ url, why string }{
		{failures, "FAILURE_QUEUE_URL"},
		{named, "cache-invalidation-failures"},
		{redriven, "dead-letter queue"},
		{dlq, "dead-letter queue"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"inspect", "--queue", q.url, "--for", "3s"}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "refuse") || !strings.Contains(stderr.String(), q.why) {
			t.Errorf("%s: exit %d, stderr %q: want 2 and a refusal naming %q", q.url, code, stderr.String(), q.why)
		}
		if left := received(t, q.url, 5); len(left) != 5 {
			t.Errorf("%s: %d of the 5 messages left", q.url, len(left))
		}
	}
}
