package functions

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/localstack/esm"
	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// TestParkedMessagesCarryTheDocumentedAttributes: every attribute
// docs/operations.md lists on a parked message is on what each front end
// that consumes a queue parks, and names that queue.
func TestParkedMessagesCarryTheDocumentedAttributes(t *testing.T) {
	documented := parkedAttributesDocumented(t)
	for _, frontEnd := range []struct {
		name  string
		start func(t *testing.T, q queue, env []string)
	}{
		{"sqs-invalidate", func(t *testing.T, q queue, env []string) {
			fn := emulator(t, "sqs-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: env})
			mapping(t, (&esm.SQSMapping{Client: awsenv.SQS(t), QueueURL: q.URL, Functions: []esm.Invoker{fn}, WaitTime: time.Second}).Run)
		}},
		{"poller", func(t *testing.T, q queue, env []string) { startPoller(t, q, testenv.WorkerCacheConfig(t), env...) }},
	} {
		t.Run(frontEnd.name, func(t *testing.T) {
			q := newQueue(t, 30*time.Second, 5)
			failures, env := failureQueue(t)
			frontEnd.start(t, q, env)
			sendRaw(t, q, `{"entity":"user","id":`)
			attrs := parkedMessageAttributes(t, failures)
			for _, name := range documented {
				if attrs[name] == "" {
					t.Errorf("the parked message has no %q attribute, which docs/operations.md lists (it has %v)", name, attrs)
				}
			}
			if attrs["from"] != q.ARN {
				t.Errorf("from = %q, want the queue's ARN %q", attrs["from"], q.ARN)
			}
		})
	}
}

// parkedAttributesDocumented reads the attribute names docs/operations.md
// lists after "Its attributes:", leaving out what their parentheses say.
func parkedAttributesDocumented(t *testing.T) []string {
	t.Helper()
	page, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(page)), " ")
	_, list, ok := strings.Cut(text, "Its attributes: ")
	if !ok {
		t.Fatal(`docs/operations.md has no "Its attributes:" list`)
	}
	var names []string
	depth, quoted, name := 0, false, ""
	for _, r := range list {
		switch {
		case r == '`' && depth == 0:
			if quoted {
				names = append(names, name)
			}
			quoted, name = !quoted, ""
		case quoted:
			name += string(r)
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == '.' && depth == 0:
			if len(names) < 5 {
				t.Fatalf("docs/operations.md lists only %q as a parked message's attributes", names)
			}
			return names
		}
	}
	t.Fatal("docs/operations.md's list of attributes does not end")
	return nil
}

// parkedMessageAttributes waits for a parked message in the failure queue
// at url and returns its attributes, leaving it there.
func parkedMessageAttributes(t *testing.T, url string) map[string]string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		out, err := awsenv.SQS(t).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 1, WaitTimeSeconds: 1, VisibilityTimeout: 0, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			attrs := map[string]string{}
			for name, v := range m.MessageAttributes {
				attrs[name] = aws.ToString(v.StringValue)
			}
			return attrs
		}
	}
	t.Fatal("nothing parked after 20 s")
	return nil
}
