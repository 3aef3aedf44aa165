package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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
		{[]string{"replay", "--help"}, 0, "never the worker's live queue (QUEUE_URL)"},
		{[]string{"inspect", "--help"}, 0, "consumes only a queue of its own"},
		{[]string{"replay", "--queue", ""}, 2, "no queue"},
		{[]string{"keys", "--help"}, 0, "usage: invalidator keys"},
		{[]string{"keys", "no-such-file.json"}, 2, "no-such-file.json"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.out) {
			t.Errorf("%q: exit %d, want %d; output %q, want %q in it", tc.args, code, tc.code, stdout.String()+stderr.String(), tc.out)
		}
	}
}

// TestReplayExitStatus: non-zero while a message fails, zero once all pass;
// --json prints one object per message, then the summary.
func TestReplayExitStatus(t *testing.T) {
	testenv.Cache(t)
	c := awsenv.SQS(t)
	q, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("test-cli-" + strings.ToLower(rand.Text()[:12]))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	send := func(body string) {
		if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	replay := func() (int, []map[string]any) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"replay", "--queue", *q.QueueUrl, "--json"}, &stdout, &stderr)
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
	if _, err := c.PurgeQueue(t.Context(), &sqs.PurgeQueueInput{QueueUrl: q.QueueUrl}); err != nil {
		t.Fatal(err)
	}
	send(`{"entity":"user","id":"` + rand.Text() + `"}`)
	if code, lines := replay(); code != 0 || len(lines) != 2 || lines[0]["deleted"] != true {
		t.Fatalf("exit %d, output %v: want 0 and the message deleted", code, lines)
	}
}
