// Package lambdaruntime runs a Lambda function's handler against the Lambda
// Runtime API (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html):
// what aws-lambda-go's lambda.Start did for a handler given the raw payload,
// without its reflection, its RPC mode or its weight at cold start.
//
// Start asks for each event in turn, calls the handler with a context that
// has the invoke's deadline, request ID, function ARN and trace ID, and
// posts the response, or the error as aws-lambda-go reported it: the
// error's type name as errorType, its text as errorMessage. A panicking
// handler is reported the same way, with its stack, and then ends the
// process, so that Lambda starts a fresh one.
package lambdaruntime
