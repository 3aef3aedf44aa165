// Command stream-invalidate is the DynamoDB-Streams-triggered Lambda function:
// it reports the sequence numbers of the failed records.
package main

import (
	"github.com/invalidator-go/invalidator/internal/frontend/function"
)

func main() { function.Start("stream-invalidate", function.DynamoDB) }
