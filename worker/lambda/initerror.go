package lambda

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"reflect"

	"github.com/invalidator-go/invalidator/worker"
)

// initError stops a function that cannot start: one line in its log, and
// the reason posted to the Runtime API's init/error — which aws-lambda-go
// has no call for — so that the invoke waiting on init fails with it
// rather than with an anonymous Runtime.ExitError. Then it exits 1.
func initError(name string, err error) {
	worker.LogStartFailure(name, err)
	if api := os.Getenv("AWS_LAMBDA_RUNTIME_API"); api != "" {
		kind := reflect.TypeOf(err)
		for kind.Kind() == reflect.Pointer {
			kind = kind.Elem()
		}
		body, _ := json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": kind.Name()}) // named as aws-lambda-go names an invoke's error
		req, _ := http.NewRequest(http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
		req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.InitError")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	os.Exit(1)
}
