package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
)

// server is the cache server the groups measure, and what tells the CPU
// time it has used: local when it can (see serverCPU).
type server struct {
	cfg    elasticache.Config
	client valkey.Client
	used   func() time.Duration
	local  bool
}

// serverCPU returns what tells the CPU time the cache server has used so
// far, and whether it can: the server must run on this machine, as make
// bench's does. It is read from /proc in clock ticks, 10 ms on Linux.
func serverCPU(ctx context.Context, client valkey.Client) (func() time.Duration, bool) {
	none := func() time.Duration { return 0 }
	info, err := client.Do(ctx, client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return none, false
	}
	_, pid, _ := strings.Cut(info, "process_id:")
	pid, _, _ = strings.Cut(pid, "\r\n")
	if _, err := processCPU(pid); pid == "" || err != nil {
		return none, false
	}
	return func() time.Duration { cpu, _ := processCPU(pid); return cpu }, true
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// medianRatio is the median of the rounds' ratios a[i]/b[i].
func medianRatio(a, b []float64) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return median(r)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// functionEnv points a function at the benchmark's cache, second deletes
// off: they add an SQS send to an invoke, which neither reference makes.
func functionEnv() []string {
	cfg, _ := elasticache.ConfigFromEnv(os.Getenv)
	return append(cfg.Env(), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128", "SECOND_DELETE_DELAY=0")
}

// build builds a reference bootstrap as the functions are built.
func build(name string) string {
	dir, err := os.MkdirTemp("", "bench-"+name+"-")
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", path, "./"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return path
}

// signature is as long as the real ones: most of an envelope's bytes.
var signature = strings.Repeat("EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjwu6A4VbeS0QHVCkhRS7fUQ", 5)

// snsMessages builds SQS messages carrying SNS envelopes, as the
// cache-invalidation queue receives them and Lambda delivers them, one
// product change each.
func snsMessages(from, n int) []lambdaevents.SQSMessage {
	msgs := make([]lambdaevents.SQSMessage, n)
	for i := range msgs {
		id := strconv.Itoa(from + i)
		change, _ := json.Marshal(map[string]any{"entity": "product", "id": id, "op": "update", "version": 3})
		envelope, _ := json.Marshal(map[string]string{
			"Type": "Notification", "MessageId": "5f2b4c5e-0000-4000-8000-" + fmt.Sprintf("%012d", from+i),
			"TopicArn": "arn:aws:sns:us-east-1:123456789012:cache-changes", "Message": string(change),
			"Timestamp": "2026-11-29T12:00:00.000Z", "SignatureVersion": "1", "Signature": signature,
			"SigningCertURL": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem",
			"UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-1:123456789012:cache-changes:0",
		})
		msgs[i] = lambdaevents.SQSMessage{
			MessageId: fmt.Sprintf("059f36b4-87a3-44ab-83d2-%012d", from+i), Body: string(envelope),
			ReceiptHandle: "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a" + strings.Repeat("Q", 120) + id,
			Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1795953600000",
				"SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1795953600001"},
			MessageAttributes: map[string]lambdaevents.SQSMessageAttribute{}, Md5OfBody: "e4e68fb7bd0e697a0ae8f1bb342846b3",
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:cache-invalidation", AWSRegion: "us-east-1",
		}
	}
	return msgs
}
