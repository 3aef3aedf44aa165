package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/internal/own"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

func TestVerbsAndHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, 2, "usage: invalidator <verb>"},
		{[]string{"help"}, 0, "replay"},
		{[]string{"nope"}, 2, `unknown verb "nope"`},
		{[]string{"replay", "--help"}, 0, "usage: invalidator replay"},
		{[]string{"replay", "--help"}, 0, "refuses QUEUE_URL, RAW_QUEUE_URL, FAILOVER_WINDOW_QUEUE_URL and"},
		{[]string{"inspect", "--help"}, 0, "consumes only a queue of its own"},
		{[]string{"replay", "--queue", ""}, 2, "no queue"},
		{[]string{"replay", "--queue", "q", "elsewhere"}, 2, `unexpected argument "elsewhere"`},
		{[]string{"replay", "--queue", "q", "--default-rules", "--rules", "rules.yaml"}, 2, "give one"},
		{[]string{"replay", "--queue", "q", "--default-rules", "--ecpu-per-second", "-1"}, 2, "--ecpu-per-second"},
		{[]string{"replay", "--queue", "q", "--default-rules", "--delete"}, 2, "--delete is for --s3"},
		{[]string{"replay", "--s3", "bucket/prefix", "--default-rules"}, 2, "want s3://BUCKET/PREFIX"},
		{[]string{"replay", "--s3", "s3:///prefix", "--default-rules"}, 2, "want s3://BUCKET/PREFIX"},
		{[]string{"keys", "--help"}, 0, "usage: invalidator keys"},
		{[]string{"keys", "no-such-file.json"}, 2, "no-such-file.json"},
		{[]string{"cache", "--help"}, 0, "usage: invalidator cache"},
		{[]string{"cache", "set", "k"}, 2, "usage: invalidator cache"},
		{[]string{"cache", "drop", "k"}, 2, "usage: invalidator cache"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.out) {
			t.Errorf("%q: exit %d, want %d; output %q, want %q in it", tc.args, code, tc.code, stdout.String()+stderr.String(), tc.out)
		}
	}
}

// TestHelpNamesTheRefusedQueues: inspect's help names every queue of the
// worker's it refuses, replay's the live ones, by variable and by each name.
func TestHelpNamesTheRefusedQueues(t *testing.T) {
	for _, verb := range []string{"inspect", "replay"} {
		var stdout, stderr bytes.Buffer
		run([]string{verb, "--help"}, &stdout, &stderr)
		help := strings.Join(strings.Fields(stdout.String()+stderr.String()), " ")
		for _, q := range own.Queues {
			if verb == "replay" && !q.Live {
				continue
			}
			for _, name := range []string{q.Var, strings.TrimPrefix(q.Name, "cache-invalidation"), "-" + q.ID + "-"} {
				if name != "" && name != "--" && !strings.Contains(help, name) {
					t.Errorf("invalidator %s --help does not name %s, which it refuses", verb, name)
				}
			}
		}
	}
}

// TestReplayExitStatus: non-zero while a message fails, zero once all pass;
// --json prints one object per message, then the summary.
func TestReplayExitStatus(t *testing.T) {
	testenv.Cache(t)
	t.Setenv("SECOND_DELETE_QUEUE_URL", "")
	c := awsenv.SQS(t)
	q, _ := newQueue(t, "test-cli-"+strings.ToLower(rand.Text()[:12]), nil)
	send := func(body string) {
		if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	replay := func() (int, []map[string]any) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"replay", "--queue", q, "--default-rules", "--json"}, &stdout, &stderr)
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not a JSON line: %q (stderr %s)", l, stderr.String())
			}
			lines = append(lines, m)
		}
		return code, lines
	}
	send(`{"entity":"user","id":"` + rand.Text() + `"}`)
	send(`{"entity":"user"}`)
	// A send may land twice (at least once, and moto under load does):
	// count what was replayed rather than expect two lines.
	code, lines := replay()
	var passed, failed float64
	for _, l := range lines[:len(lines)-1] {
		if l["deleted"] == true {
			passed++
		} else if !strings.Contains(fmt.Sprint(l["error"]), "placeholder {id}") {
			t.Fatalf("line %v: want the bad message's reason", l)
		} else {
			failed++
		}
	}
	summary := lines[len(lines)-1]
	if code != 1 || passed < 1 || failed < 1 || summary["replayed"] != passed+failed || summary["failed"] != failed {
		t.Fatalf("exit %d, output %v: want 1, each message and a summary", code, lines)
	}
	// The bad message is left: purge it, and all passes.
	if _, err := c.PurgeQueue(t.Context(), &sqs.PurgeQueueInput{QueueUrl: aws.String(q)}); err != nil {
		t.Fatal(err)
	}
	send(`{"entity":"user","id":"` + rand.Text() + `"}`)
	if code, lines := replay(); code != 0 || len(lines) != 2 || lines[0]["deleted"] != true {
		t.Fatalf("exit %d, output %v: want 0 and the message deleted", code, lines)
	}
}

// TestCacheVerb: set, get and gone against the stack; gone waits for a
// deletion and fails, non-zero, when the key outlives --within.
func TestCacheVerb(t *testing.T) {
	c := testenv.Cache(t)
	key := "cache:cli:" + rand.Text()
	cli := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"cache"}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := cli("set", key, "v1"); code != 0 {
		t.Fatalf("set: exit %d: %s", code, out)
	}
	if code, out := cli("get", key); code != 0 || out != "v1\n" {
		t.Fatalf("get: exit %d, %q; want 0 and the value", code, out)
	}
	if code, out := cli("gone", key, "--within", "300ms"); code != 1 || !strings.Contains(out, "still there after 0.3 s") {
		t.Fatalf("gone of a key that stays: exit %d, %q; want 1 and why", code, out)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = c.Do(context.Background(), c.B().Unlink().Key(key).Build()).Error()
	}()
	if code, out := cli("gone", key); code != 0 || !strings.HasPrefix(out, key+" gone after 0.") {
		t.Fatalf("gone: exit %d, %q; want 0 and how long it waited", code, out)
	}
	if code, out := cli("get", key); code != 1 || !strings.Contains(out, "no such key") {
		t.Fatalf("get of a key that is gone: exit %d, %q", code, out)
	}
}

// TestReplayDryRunConsumesNothing: a dry run prints each message's plan or
// failure and leaves them all, visible; --wait-for fails when fewer come.
func TestReplayDryRunConsumesNothing(t *testing.T) {
	q, _ := newQueue(t, "test-cli-"+strings.ToLower(rand.Text()[:12]), nil, `{"entity":"user","id":"7"}`, `{"entity":"user"}`)
	// No cache is asked: the endpoint is nothing.
	t.Setenv("CACHE_ENDPOINT", "127.0.0.1:1")
	for range 2 {
		var stdout, stderr bytes.Buffer
		code := run([]string{"replay", "--queue", q, "--default-rules", "--dry-run", "--wait-for", "2"}, &stdout, &stderr)
		if out := stdout.String(); code != 0 || !strings.Contains(out, "would delete") || !strings.Contains(out, "cache:user:7") ||
			!strings.Contains(out, "would FAIL") || !strings.Contains(stderr.String(), "nothing touched") {
			t.Fatalf("dry run: exit %d, %s%s; want both messages planned", code, out, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"replay", "--queue", q, "--default-rules", "--dry-run", "--wait-for", "3", "--within", "2s"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "2 message(s) read of the 3 waited for") {
		t.Fatalf("a wait for more than came: exit %d, %s", code, stderr.String())
	}
}
