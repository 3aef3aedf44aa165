package hostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/valkey-io/valkey-go"
	"gopkg.in/yaml.v3"

	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/writethrough"
)

// The rows checked at their own layer: what a producer or a cache holds
// reaches them through the CLI, the template, the docs, or the services'
// library, not through the front ends.

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// cli is the invalidator CLI, built once.
func cli(t *testing.T) string {
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hostile-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "invalidator")
		out, err := exec.Command("go", append(append([]string{"build"}, testenv.BuildFlags()...), "-o", cliPath, "../../cmd/invalidator")...).CombinedOutput()
		if err != nil {
			cliErr = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatalf("build the CLI: %v", cliErr)
	}
	return cliPath
}

// keysPrintedQuoted: invalidator keys prints a key holding terminal escapes
// and line breaks quoted, not raw to the terminal (finding 11).
func keysPrintedQuoted(t *testing.T) {
	cmd := exec.Command(cli(t), "keys")
	cmd.Stdin = strings.NewReader(`{"keys":["cache:a\u001b[2Jb\nc\u0007d\u009bq"]}`)
	cmd.Env = append(os.Environ(), "INVALIDATION_RULES=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("invalidator keys: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, raw := range []string{"\x1b", "\a", "b\nc", "\u009b"} {
		if strings.Contains(out, raw) {
			t.Errorf("invalidator keys printed %q raw: %q; want a key with non-printable characters quoted", raw, out)
		}
	}
}

// accessStringsNameKeys: the access strings docs/deploy.md gives services
// name their keys and their channels (finding 7).
func accessStringsNameKeys(t *testing.T) {
	page, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	found := regexp.MustCompile("`(on [^`]*)`").FindAllStringSubmatch(string(page), -1)
	if len(found) == 0 {
		t.Fatal("docs/deploy.md shows no access string (`on ...`)")
	}
	for _, m := range found {
		s := m[1]
		if strings.Contains(s, "~*") || strings.Contains(s, "allkeys") || !strings.Contains(s, "~") {
			t.Errorf("docs/deploy.md's access string %q: want the keys the service needs named (~cache:*), not every key", s)
		}
		if !strings.Contains(s, "resetchannels") && !regexp.MustCompile(`(^|\s)&[^*\s]`).MatchString(s) {
			t.Errorf("docs/deploy.md's access string %q: want its channels named (resetchannels, &channel), not left to the default", s)
		}
	}
}

// template is template.yaml's resources, with the globals.
func template(t *testing.T) (globals *yaml.Node, resources map[string]*yaml.Node) {
	data, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Globals   yaml.Node            `yaml:"Globals"`
		Resources map[string]yaml.Node `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	resources = map[string]*yaml.Node{}
	for id, n := range doc.Resources {
		resources[id] = &n
	}
	return &doc.Globals, resources
}

// get is the value at path in a mapping node, nil when absent.
func get(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// noSecretInEnvironment: no function's environment holds a resolved secret,
// which GetFunctionConfiguration shows in plaintext (finding 9).
func noSecretInEnvironment(t *testing.T) {
	globals, resources := template(t)
	envs := map[string]*yaml.Node{"Globals.Function": get(globals, "Function", "Environment", "Variables")}
	for id, r := range resources {
		if v := get(r, "Type"); v != nil && v.Value == "AWS::Serverless::Function" {
			envs[id] = get(r, "Properties", "Environment", "Variables")
		}
	}
	for where, vars := range envs {
		if vars == nil {
			continue
		}
		for i := 0; i+1 < len(vars.Content); i += 2 {
			text, _ := yaml.Marshal(vars.Content[i+1])
			if regexp.MustCompile(`resolve:(secretsmanager|ssm-secure)`).Match(text) {
				t.Errorf("%s's environment sets %s to a resolved secret: want it read at init by its ARN", where, vars.Content[i].Value)
			}
		}
	}
}

// queuesRetained: the queues that hold work or parked records outlive a
// replacement or a stack's deletion (finding 10). A queue that keeps its
// messages a minute (the inspector's copies, the failover window) holds no
// work past the stack.
func queuesRetained(t *testing.T) {
	_, resources := template(t)
	for id, r := range resources {
		if v := get(r, "Type"); v == nil || v.Value != "AWS::SQS::Queue" {
			continue
		}
		if v := get(r, "Properties", "MessageRetentionPeriod"); v != nil && v.Value == "60" {
			continue
		}
		if p := get(r, "DeletionPolicy"); p == nil || (p.Value != "Retain" && p.Value != "RetainExceptOnCreate") {
			t.Errorf("queue %s has no DeletionPolicy Retain: deleting the stack loses what it holds", id)
		}
		if p := get(r, "UpdateReplacePolicy"); p == nil || p.Value != "Retain" {
			t.Errorf("queue %s has no UpdateReplacePolicy Retain: replacing it (a new NamePrefix) loses what it holds", id)
		}
	}
}

// inspectLeavesParkedRecords: invalidator inspect --queue pointed at the
// failure queue deletes nothing of it (finding 5).
func inspectLeavesParkedRecords(t *testing.T) {
	ns := strings.ToLower(namespace())
	url := parkedQueue(t, ns+"cache-invalidation-failures", ns)
	output, runErr := runCLI(t, []string{"FAILURE_QUEUE_URL=" + url}, "inspect", "--queue", url, "--for", "3s", "--json")
	if left := waiting(t, url); left != 5 {
		t.Errorf("invalidator inspect --queue on the failure queue (%v) left %d of its 5 parked records; want it to refuse the worker's queues and delete none\n%s",
			runErr, left, tail(output))
	}
}

// replayWithoutRules: invalidator replay without the worker's rules
// neither deletes the keys the default rules plan nor the records it read
// (issue 38, item 4).
func replayWithoutRules(t *testing.T) {
	client := testenv.Cache(t)
	ns := strings.ToLower(namespace())
	url, key := parkedQueue(t, ns+"-failures", ns), "cache:product:"+ns+"-0"
	if err := client.Do(t.Context(), client.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Do(context.Background(), client.B().Del().Key(key).Build()) })
	output, runErr := runCLI(t, []string{"INVALIDATION_RULES=", "INVALIDATION_RULES_FILE=", "SECOND_DELETE_QUEUE_URL="}, "replay", "--queue", url)
	kept, err := client.Do(t.Context(), client.B().Exists().Key(key).Build()).AsInt64()
	// At least 5: a send the SDK made again on a broken connection counts twice.
	if left := waiting(t, url); left < 5 || kept != 1 || err != nil || exitCode(runErr) != 2 {
		t.Errorf("invalidator replay without rules (%v) left %d of 5 parked records and %d of 1 keys (%v); want it to exit 2, touching nothing\n%s",
			runErr, left, kept, err, tail(output))
	}
}

// replayLeavesLiveQueues: invalidator replay --queue pointed at the
// worker's queue, by QUEUE_URL, or at its delay queue, by CloudFormation's
// name for it, consumes nothing (issue 38, item 4).
func replayLeavesLiveQueues(t *testing.T) {
	ns := strings.ToLower(namespace())
	live, delay := parkedQueue(t, ns+"-worker", ns), parkedQueue(t, "stack"+ns+"-SecondDeleteQueue-A1B2", ns)
	for _, url := range []string{live, delay} {
		output, runErr := runCLI(t, []string{"QUEUE_URL=" + live, "INVALIDATION_RULES=default: [\"cache:{entity}:{id}\"]", "SECOND_DELETE_QUEUE_URL="}, "replay", "--queue", url)
		if left := waiting(t, url); left < 5 || exitCode(runErr) != 2 { // at least: a send made again counts twice
			t.Errorf("invalidator replay --queue %s (%v) left %d of its 5 messages; want it to exit 2, refusing the queues the worker takes from\n%s",
				url, runErr, left, tail(output))
		}
	}
}

// parkedQueue makes a queue named name holding five changes of products
// ns-0 to ns-4, deleted when the test ends, and returns its URL.
func parkedQueue(t *testing.T, name, ns string) string {
	client := awsenv.SQS(t)
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	for i := range 5 {
		if _, err := client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url),
			MessageBody: aws.String(`{"entity":"product","id":"` + ns + "-" + strconv.Itoa(i) + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	return url
}

// runCLI runs the CLI with args in this environment and env, within 30 s,
// and returns what it printed and how it ended.
func runCLI(t *testing.T, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli(t), args...)
	cmd.Env = append(os.Environ(), env...)
	output, err := cmd.CombinedOutput()
	return string(output), err
}

// exitCode is the exit status of a process that ended with err.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// waiting is how many messages the queue at url holds, visible or not.
func waiting(t *testing.T, url string) int {
	attrs, err := awsenv.SQS(t).GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ := strconv.Atoi(attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	hidden, _ := strconv.Atoi(attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible + hidden
}

// leaseWithoutTTL: a writethrough lease that lost its TTL (a foreign SET,
// a PERSIST) is dropped, not waited on (finding 8).
func leaseWithoutTTL(t *testing.T) {
	client := testenv.Cache(t)
	key := "cache:hostile:" + namespace() + ":lease"
	if err := client.Do(t.Context(), client.B().Set().Key(key).Value("wt1|l|foreign|").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Do(context.Background(), client.B().Del().Key(key).Build()) })
	c := writethrough.New(client, writethrough.Options[string]{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	v, err := c.Get(ctx, key, func(context.Context) (string, error) { return "fresh", nil })
	if took := time.Since(start); err != nil || v != "fresh" || took > time.Second {
		t.Errorf("Get of a key holding a lease without a TTL: %q, %v after %v; want the value loaded within 1 s, not a wait of LeaseTTL (3 s)", v, err, took.Round(time.Millisecond))
	}
	v, err = c.Get(ctx, key, func(context.Context) (string, error) { return "", writethrough.ErrNotFound })
	if err != nil || v != "fresh" {
		t.Errorf("the next Get: %q, %v; want the value the first one filled, the lease gone", v, err)
	}
}

// foreignValue: a value writethrough did not write ends in a miss and a
// reload, as it held up. The metric that counts it is the wt branch's own
// test (finding 11).
func foreignValue(t *testing.T) {
	client := testenv.Cache(t)
	key := "cache:hostile:" + namespace() + ":foreign"
	if err := client.Do(t.Context(), client.B().Set().Key(key).Value("{\"price\":1}").ExSeconds(600).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	c := writethrough.New(client, writethrough.Options[string]{})
	v, err := c.Get(t.Context(), key, func(context.Context) (string, error) { return "fresh", nil })
	if err != nil || v != "fresh" {
		t.Errorf("Get of a key holding a foreign value: %q, %v; want a miss and the value loaded", v, err)
	}
}

// getManyAtItsDeadline: a GetMany of 200 ms whose loader blocks 3 s,
// ignoring its context, returns at its deadline, as Get does (finding
// 38.5: it took 3.0 s, its leases held).
func getManyAtItsDeadline(t *testing.T) {
	client := testenv.Cache(t)
	ns := namespace()
	ks := keys(2, func(i int) string { return "cache:hostile:" + ns + ":many:" + strconv.Itoa(i) })
	c := writethrough.New(client, writethrough.Options[string]{TTL: time.Minute})
	loaded := make(chan struct{})
	t.Cleanup(func() { <-loaded }) // before the client closes: the load goes on after GetMany
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetMany(ctx, ks, func(context.Context, []string) (map[string]string, error) {
		defer close(loaded)
		time.Sleep(3 * time.Second)
		return nil, nil
	})
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 250*time.Millisecond {
		t.Errorf("GetMany of 200 ms, its loader blocked 3 s: %v after %v; want the deadline's error within 250 ms", err, took.Round(time.Millisecond))
	}
}

// getManyPipelines: a GetMany of 20,000 misses with MaxBatch 20,000 sends
// no pipeline of more than 1,000 commands, its fill's included (finding
// 38.5: the fill sent 20,000).
func getManyPipelines(t *testing.T) {
	client := &largestPipeline{Client: testenv.Cache(t)}
	ns := namespace()
	ks := keys(20_000, func(i int) string { return "cache:hostile:" + ns + ":many:" + strconv.Itoa(i) })
	c := writethrough.New(client, writethrough.Options[string]{TTL: time.Minute, MaxBatch: 20_000, CacheTimeout: 2 * time.Second})
	got, err := c.GetMany(t.Context(), ks, func(_ context.Context, asked []string) (map[string]string, error) {
		vs := make(map[string]string, len(asked))
		for _, k := range asked {
			vs[k] = "fresh"
		}
		return vs, nil
	})
	if err != nil || len(got) != len(ks) || client.most.Load() > 1000 {
		t.Errorf("GetMany of 20,000 misses, MaxBatch 20,000: %d values, %v, a pipeline of %d commands; want every value, at most 1,000 commands a pipeline", len(got), err, client.most.Load())
	}
}

// largestPipeline is a valkey-go client that notes the most commands it
// was given at once.
type largestPipeline struct {
	valkey.Client
	most atomic.Int64
}

func (c *largestPipeline) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	n := int64(len(multi))
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	return c.Client.DoMulti(ctx, multi...)
}
