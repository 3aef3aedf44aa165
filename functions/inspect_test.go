package functions

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// inspectReport is the part of invalidator inspect --json the tests read.
type inspectReport struct {
	Changes int `json:"changes"`
	Delays  []struct {
		After        string  `json:"after"`
		Keys         int     `json:"keys"`
		Inconsistent int     `json:"inconsistent"`
		Nines        float64 `json:"nines"`
	} `json:"delays"`
}

// inspectionKeys is the inspections' size: 100 messages of 10 changes of 10
// keys, 10,000 keys, as many checks as 4 nines take to show.
const inspectionMessages, inspectionChanges, inspectionKeys = 100, 10, 10

// newInspectQueue is a queue of the inspector's own, without a DLQ as the
// template's: inspect refuses a queue with one. It hides a message 5 s: one
// whose receive was lost on its way comes back well within TestInspect's
// wait.
func newInspectQueue(t *testing.T) queue {
	t.Helper()
	c := awsenv.SQS(t)
	q := queue{URL: createQueue(t, c, "test-"+strings.ToLower(rand.Text()[:12])+"-inspect", map[string]string{"VisibilityTimeout": "5"})}
	q.ARN = queueARN(t, c, q.URL)
	return q
}

// TestInspect runs invalidator inspect on its own queue beside the worker's:
// with the worker stopped it reports the keys the writes left stale; with
// the poller running, at least 4 nines at +10 s.
func TestInspect(t *testing.T) {
	for _, worker := range []bool{false, true} {
		name := map[bool]string{false: "worker stopped", true: "poller running"}[worker]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := testenv.Cache(t)
			workerQueue, inspectQueue := newQueue(t, 30*time.Second, 5), newInspectQueue(t)
			topic := newTopic(t, workerQueue, inspectQueue)
			if worker {
				startPoller(t, workerQueue, testenv.WorkerCacheConfig(t))
			}
			cmd := exec.Command(binary("invalidator"), "inspect", "--queue", inspectQueue.URL, "--at", "1s,10s",
				"--version-path", "version", "--json")
			cmd.Env = append(os.Environ(), testenv.CacheConfig(t).Env()...)
			var stdout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // for the inspector to start reading
			write(t, c, topic)
			// Every change read, the first signal stops the reading and the
			// checks due are done.
			eventually(t, 30*time.Second, "the inspector did not read its queue", func() bool { return messages(t, inspectQueue.URL) == 0 })
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("invalidator inspect: %v", err)
			}
			var rep inspectReport
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("%v: %s", err, stdout.Bytes())
			}
			t.Logf("%+v", rep)
			total := inspectionMessages * inspectionChanges * inspectionKeys
			at10 := rep.Delays[1]
			if rep.Changes != inspectionMessages*inspectionChanges || at10.Keys != total {
				t.Fatalf("%d changes read, %d keys checked at +10s: want every one of %d and %d", rep.Changes, at10.Keys, inspectionMessages*inspectionChanges, total)
			}
			if !worker && at10.Inconsistent != total {
				t.Fatalf("with the worker stopped, %d of %d keys inconsistent at +10s: want all", at10.Inconsistent, total)
			}
			if worker && (at10.Inconsistent != 0 || at10.Nines < 4) {
				t.Fatalf("with the poller running, %d inconsistent at +10s, %.2f nines: want 0 and at least 4", at10.Inconsistent, at10.Nines)
			}
		})
	}
}

// write caches the keys of every change at version 1, then publishes the
// changes to version 2.
func write(t *testing.T, c valkey.Client, topic string) {
	t.Helper()
	run := strings.ToLower(rand.Text()[:8])
	for m := range inspectionMessages {
		var changes []string
		var cmds valkey.Commands
		for ch := range inspectionChanges {
			id := fmt.Sprintf("%s-%d-%d", run, m, ch)
			var keys []string
			for k := range inspectionKeys {
				key := fmt.Sprintf("cache:inspect:%s:%d", id, k)
				keys = append(keys, `"`+key+`"`)
				cmds = append(cmds, c.B().Set().Key(key).Value(`{"version":1}`).Ex(time.Hour).Build())
			}
			changes = append(changes, fmt.Sprintf(`{"entity":"inspect","id":"%s","version":2,"keys":[%s]}`, id, strings.Join(keys, ",")))
		}
		for _, r := range c.DoMulti(t.Context(), cmds...) {
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := awsenv.SNS(t).Publish(t.Context(), &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String("[" + strings.Join(changes, ",") + "]")}); err != nil {
			t.Fatal(err)
		}
	}
}
