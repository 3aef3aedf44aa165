// Command sqs-invalidate is the SQS-triggered Lambda function: it reports exactly
// the failed messages as batch item failures.
package main

import (
	"github.com/invalidator-go/invalidator/frontend/lambda"
	"github.com/invalidator-go/invalidator/frontend/worker"
)

func main() { lambda.Start("sqs-invalidate", (*worker.Worker).SQS) }
