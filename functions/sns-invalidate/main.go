// Command sns-invalidate is the SNS-triggered Lambda function: the invoke fails
// when its record fails, so the asynchronous invoke is retried.
package main

import (
	"github.com/invalidator-go/invalidator/internal/frontend/function"
)

func main() { function.Start("sns-invalidate", function.SNS) }
