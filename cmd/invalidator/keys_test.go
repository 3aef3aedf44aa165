package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/localstack/testenv"
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

// TestKeysPrintsTags: the tags a record invalidates, planned by the rules
// or given by the message, and with --members the entries each holds now.
func TestKeysPrintsTags(t *testing.T) {
	t.Setenv("INVALIDATION_RULES", "")
	t.Setenv("INVALIDATION_RULES_FILE", "")
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	prefix := "cache:tag:keys-test:" + rand.Text()[:8] + ":"
	if err := os.WriteFile(rules, []byte(`{tagPrefix: "`+prefix+`", tags: {tables: {CaptureProducts: ["product:{key.id}", "category:{item.category}"]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	change := filepath.Join(dir, "change.json")
	if err := os.WriteFile(change, []byte(`{"entity":"product","id":"7","tags":["product:7","category:a"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"keys", "--rules", rules, change}, &stdout, &stderr); code != 0 || stdout.String() != "-\tcache:product:7\ttags: product:7 category:a\n" {
		t.Fatalf("exit %d, output %q %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"keys", "--json", "--rules", rules, "../../events/testdata/dynamodb.json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, %s", code, stderr.String())
	}
	var first planned
	if err := json.Unmarshal([]byte(strings.Split(stdout.String(), "\n")[0]), &first); err != nil || len(first.Tags) < 2 || first.Tags[0] != "product:p-42" {
		t.Fatalf("the stream record's tags: %+v, %v", first, err)
	}

	client := testenv.Cache(t) // --members reads the cache
	for _, k := range []string{"cache:list:1", "cache:list:2"} {
		if err := client.Do(t.Context(), client.B().Hset().Key(prefix+"product:7").FieldValue().FieldValue(k, "1:1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { client.Do(context.Background(), client.B().Unlink().Key(prefix+"product:7").Build()) })
	stdout.Reset()
	if code := run([]string{"keys", "--members", "1", "--rules", rules, change}, &stdout, &stderr); code != 0 ||
		!regexp.MustCompile(`\n\ttag product:7: cache:list:[12] …\n\ttag category:a: \(none\)\n$`).MatchString(stdout.String()) {
		t.Fatalf("exit %d, output %q %q", code, stdout.String(), stderr.String())
	}
}

// TestKeysPrintsWhatTheTerminalShows: a record ID, key, tag or reason
// holding a character that does not print — a terminal's escape sequence,
// a line feed — is printed quoted, and so is an ID, key or tag holding a
// space, which separates them; the others are printed as they are; --json
// is exact either way.
func TestKeysPrintsWhatTheTerminalShows(t *testing.T) {
	t.Setenv("INVALIDATION_RULES", "")
	t.Setenv("INVALIDATION_RULES_FILE", "")
	dir := t.TempDir()
	change := filepath.Join(dir, "change.json")
	keys := []string{"cache:plain:é", "cache:\x1b[2J\x1b[31mred", "cache:two\nlines", "cache:a b", "cache:\u202egnp.exe"}
	body, _ := json.Marshal(map[string]any{"keys": keys, "tags": []string{"t\r"}})
	if err := os.WriteFile(change, body, 0o644); err != nil {
		t.Fatal(err)
	}
	stream := filepath.Join(dir, "stream.json")
	if err := os.WriteFile(stream, []byte(`{"Records":[{"eventName":"\u001b[2J","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/T/stream/s",`+
		`"dynamodb":{"Keys":{"id":{"S":"1"}},"SequenceNumber":"1 \u001b[1m"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{change, `-	cache:plain:é "cache:\x1b[2J\x1b[31mred" "cache:two\nlines" "cache:a b" "cache:\u202egnp.exe"	tags: "t\r"` + "\n"},
		{stream, `"1 \x1b[1m"		error: "record \"1 \\x1b[1m\": eventName must be INSERT, MODIFY or REMOVE, not \x1b[2J"` + "\n"},
	} {
		var stdout, stderr bytes.Buffer
		run([]string{"keys", tc.file}, &stdout, &stderr)
		if got := stdout.String(); got != tc.want {
			t.Errorf("printed %s, want %s", got, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	run([]string{"keys", "--json", change}, &stdout, &stderr)
	var out planned
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || !slices.Equal(out.Keys, keys) || !slices.Equal(out.Tags, []string{"t\r"}) {
		t.Errorf("--json: %q %q, %v; want the keys and tags as they are", out.Keys, out.Tags, err)
	}
}
