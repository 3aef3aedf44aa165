package queuestest_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

func TestFakeSQS(t *testing.T) {
	queuestest.Contract(t, func(*testing.T) (queues.SQS, string) {
		return &queuestest.SQS{}, "https://sqs.us-east-1.amazonaws.com/123456789012/contract"
	})
}

func TestMotoSQS(t *testing.T) {
	client := awsenv.SQS(t)
	queuestest.Contract(t, func(t *testing.T) (queues.SQS, string) {
		out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("contract-" + rand.Text()[:8])})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		return client, aws.ToString(out.QueueUrl)
	})
}
