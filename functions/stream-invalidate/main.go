// Command stream-invalidate is the DynamoDB-Streams-triggered Lambda function:
// it reports the sequence numbers of the failed records.
package main

import (
	"github.com/invalidator-go/invalidator/worker/lambda"
)

func main() { lambda.Start("stream-invalidate", lambda.DynamoDB) }
