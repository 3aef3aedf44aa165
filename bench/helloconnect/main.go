// Command helloconnect is the fair reference of the cold-start benchmark:
// the smallest Lambda function that does what sqs-invalidate must — open
// the same TLS, ACL-authenticated cluster connection with valkey-go at
// init, and send one UNLINK per invoke, then, when ANNOUNCE_CHANNEL names a
// channel, one PUBLISH of the key there, as the functions announce their
// deletes to the local tiers. What sqs-invalidate adds beyond it is the
// invalidator's own cost. Fed one message per invoke, it is also the
// cost benchmark's naive design: one invoke and one delete per event. It
// answers {}, which an SQS event source reads as no message failed.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/invalidator-go/invalidator/elasticache"
)

func main() {
	cfg, err := elasticache.ConfigFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	client, err := elasticache.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	channel := os.Getenv("ANNOUNCE_CHANNEL")
	lambda.Start(func(ctx context.Context) (struct{}, error) {
		if err := client.Do(ctx, client.B().Unlink().Key("cache:hello:1").Build()).Error(); err != nil || channel == "" {
			return struct{}{}, err
		}
		return struct{}{}, client.Do(ctx, client.B().Publish().Channel(channel).Message("cache:hello:1").Build()).Error()
	})
}
