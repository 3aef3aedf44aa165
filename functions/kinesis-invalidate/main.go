// Command kinesis-invalidate is the Kinesis-triggered Lambda function: a
// commit log's rows (AWS DMS, Debezium), Kinesis Data Streams for
// DynamoDB, or change messages; it reports the sequence numbers of the
// failed records.
package main

import (
	"github.com/invalidator-go/invalidator/worker/lambda"
)

func main() { lambda.Start("kinesis-invalidate", lambda.Kinesis) }
