package lambdaruntime

import (
	"log"
	"os"
	"strconv"
)

// Start serves the Lambda function's invokes with h, for as long as the
// process lives. It returns only by exiting, with status 1: when it is not
// run by Lambda (no AWS_LAMBDA_RUNTIME_API), when the runtime API cannot
// be reached or refuses a call, and after h panicked. Lambda starts a new
// process for the next event. The reason goes to the log package's output.
func Start(h Handler) {
	api := os.Getenv("AWS_LAMBDA_RUNTIME_API")
	if api == "" {
		log.Fatal("lambdaruntime: AWS_LAMBDA_RUNTIME_API is not set: not run by Lambda or its emulator")
	}
	n := maxConcurrency()
	log.Fatal(run(newClient(api, n), h, n))
}

// InitError reports that the function cannot start, so that the invoke
// waiting for it fails with err (its type name and text, as an invoke's
// error would) rather than an anonymous Runtime.ExitError; then it exits
// with status 1. Outside Lambda it only logs err and exits.
func InitError(err error) {
	f := errorFailure(err)
	api := os.Getenv("AWS_LAMBDA_RUNTIME_API")
	if api == "" {
		log.Fatalf("%s", f.body())
	}
	c := newClient(api, 1)
	if err := c.report(c.base+"init/error", f); err != nil {
		log.Print(err)
	}
	os.Exit(1)
}

// maxConcurrency is how many invokes Lambda may send this process at once,
// as aws-lambda-go read it: 1 unless AWS_LAMBDA_MAX_CONCURRENCY says more.
func maxConcurrency() int {
	n, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_MAX_CONCURRENCY"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}
