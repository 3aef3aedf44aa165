// Command sqs-invalidate is the SQS-triggered Lambda function: it reports exactly
// the failed messages as batch item failures.
package main

import (
	"github.com/invalidator-go/invalidator/worker/lambda"
)

func main() { lambda.Start("sqs-invalidate", lambda.SQS) }
