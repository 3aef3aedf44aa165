// Package lambda runs a worker as a Lambda function: configuration from
// the environment, the cache connected in the background, and the runtime
// loop handing each invoke's raw payload to the function's handler.
package lambda
