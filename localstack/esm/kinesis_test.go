package esm_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/invalidator-go/invalidator/localstack/esm"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// A stream deleted and made again under its name (make down, make up) is a
// new stream: its mapping reads it from its first record, not from the old
// stream's checkpoint, which moto's sequence numbers, starting over, would
// place past the new records.
func TestAStreamMadeAgainIsReadFromItsStart(t *testing.T) {
	k := awsenv.Kinesis(t)
	arn := awsenv.KinesisStream(t, 1)
	name := arn[strings.LastIndex(arn, "/")+1:]
	checkpoints, err := esm.LoadCheckpoints(filepath.Join(t.TempDir(), "checkpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(arn string, want int) {
		t.Helper()
		f := &batches{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		m := &esm.KinesisMapping{Client: k, StreamARN: arn, Region: "us-east-1", Settings: esm.Settings{Function: f, Checkpoints: checkpoints}}
		go func() { done <- m.Run(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for n, _ := f.total(); n < want && time.Now().Before(deadline); n, _ = f.total() {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // anything more it would read
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n, sizes := f.total(); n != want {
			t.Fatalf("the mapping read %d records (batches %v), want %d", n, sizes, want)
		}
	}
	put := func(arn string, n int) {
		t.Helper()
		for range n {
			if _, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamARN: aws.String(arn), PartitionKey: aws.String("p"), Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(arn, 3)
	read(arn, 3)

	if _, err := k.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s not deleted after 10 s", name)
		}
	}
	time.Sleep(1100 * time.Millisecond) // a creation time of its own, to the second, whatever moto keeps
	if _, err := k.CreateStream(t.Context(), &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	awsenv.KinesisActive(t, name)
	put(arn, 2)
	read(arn, 2)
}
