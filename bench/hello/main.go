// Command hello is the reference Lambda function of the cold-start
// benchmark: a Go bootstrap that answers every invoke at once.
package main

import "github.com/aws/aws-lambda-go/lambda"

func main() {
	lambda.Start(func() (string, error) { return "hello", nil })
}
