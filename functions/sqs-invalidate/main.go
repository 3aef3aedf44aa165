// Command sqs-invalidate is the SQS-triggered Lambda function: it reports exactly
// the failed messages as batch item failures.
package main

import (
	"github.com/invalidator-go/invalidator/internal/frontend/function"
)

func main() { function.Start("sqs-invalidate", function.SQS) }
