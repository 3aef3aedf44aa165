package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeysOfEveryKindOfEvent runs keys on each kind of input it takes,
// with nothing running.
func TestKeysOfEveryKindOfEvent(t *testing.T) {
	t.Setenv("INVALIDATION_RULES", "")
	t.Setenv("INVALIDATION_RULES_FILE", "")
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`tables: {Products: ["cache:product:{key.id}", "cache:category:{item.category}"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, file string
		code       int
		want       []string // keys of the first record
	}{
		{"SQS payload", "../../events/testdata/sqs-sns.json", 0, []string{"cache:product:42"}},
		{"stream payload", "../../events/testdata/dynamodb.json", 0, nil},
		{"SNS payload, bad records in it", "../../events/testdata/sns.json", 1, []string{"cache:product:42"}},
		{"change message", write("change.json", `{"entity":"product","id":"7"}`), 0, []string{"cache:product:7"}},
		{"array of changes", write("array.json", `[{"entity":"a","id":"1"},{"keys":["cache:x"]}]`), 0, []string{"cache:a:1", "cache:x"}},
		{"SNS envelope", write("sns.json", `{"Type":"Notification","Message":"{\"entity\":\"user\",\"id\":\"3\"}"}`), 0, []string{"cache:user:3"}},
		{"EventBridge event", write("eb.json", `{"detail-type":"x","detail":{"entity":"user","id":"4"}}`), 0, []string{"cache:user:4"}},
		{"one SQS message", write("msg.json", `{"messageId":"m1","body":"{\"entity\":\"user\",\"id\":\"5\"}"}`), 0, []string{"cache:user:5"}},
		{"a key outside the rules", write("session.json", `{"keys":["session:1"]}`), 1, []string{}},
		{"no event at all", write("s3.json", `{"Records":[{"eventSource":"aws:s3","s3":{}}]}`), 1, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run([]string{"keys", "--json", "--rules", rules, tc.file}, &stdout, &stderr)
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			var first planned
			if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || code != tc.code {
				t.Fatalf("exit %d (want %d), output %q %q", code, tc.code, stdout.String(), stderr.String())
			}
			if tc.want != nil && strings.Join(first.Keys, " ") != strings.Join(tc.want, " ") {
				t.Errorf("keys %q, want %q", first.Keys, tc.want)
			}
		})
	}
}
