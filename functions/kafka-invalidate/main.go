// Command kafka-invalidate is the Kafka-triggered Lambda function (Amazon
// MSK, a self-managed cluster): a commit log's rows (Debezium on MSK
// Connect, AWS DMS) or change messages; it fails the invoke when a record
// is to be retried, and Lambda retries the batch.
package main

import (
	"github.com/invalidator-go/invalidator/worker/lambda"
)

func main() { lambda.Start("kafka-invalidate", lambda.Kafka) }
