// Command sns-invalidate is the SNS-triggered Lambda function: the invoke fails
// when its record fails, so the asynchronous invoke is retried.
package main

import (
	"github.com/invalidator-go/invalidator/worker/lambda"
)

func main() { lambda.Start("sns-invalidate", lambda.SNS) }
