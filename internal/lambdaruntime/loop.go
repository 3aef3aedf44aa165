package lambdaruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"
)

// Handler serves one invoke: the event's payload in, the response out. The
// payload is reused once it returns; a handler keeps a copy of what it
// needs after (as with aws-lambda-go, which reused it too).
type Handler func(ctx context.Context, payload []byte) ([]byte, error)

// errPanicked ends the loops after a handler panicked, its error posted.
// aws-lambda-go exits then too: the panic may have left the process's
// shared state (a lock held, the cache connection half set up) broken for
// every invoke after, and a process that exits is started afresh by Lambda
// on the next event, through init again.
var errPanicked = errors.New("lambdaruntime: the handler panicked; exiting so that Lambda starts a fresh process")

// run serves invokes with n loops at once until one fails, then waits for
// the others' invokes in flight and returns that failure. n is more than 1
// only where Lambda sends several invokes to one process
// (AWS_LAMBDA_MAX_CONCURRENCY, on managed instances).
func run(c *client, h Handler, n int) error {
	if n <= 1 {
		return c.loop(context.Background(), h, true)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil) // a loop has cancelled it already: for vet
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { cancel(c.loop(ctx, h, false)) })
	}
	wg.Wait()
	return context.Cause(ctx)
}

// loop serves one invoke after the other until it cannot go on: the
// runtime API failed, or the handler panicked. Cancelling ctx stops it at
// its next wait for an event. traceEnv sets _X_AMZN_TRACE_ID, which is
// only right with one invoke at a time.
func (c *client) loop(ctx context.Context, h Handler, traceEnv bool) error {
	var payload bytes.Buffer
	for {
		hdr, err := c.nextInvoke(ctx, &payload)
		if err != nil {
			return err
		}
		if err := c.invoke(hdr, payload.Bytes(), h, traceEnv); err != nil {
			return err
		}
	}
}

// invoke serves one event and posts its outcome. It returns an error only
// when the process cannot go on.
func (c *client) invoke(hdr http.Header, payload []byte, h Handler, traceEnv bool) error {
	inv := &invocation{
		requestID:   hdr.Get(headerRequestID),
		functionARN: hdr.Get(headerFunctionARN),
		traceID:     hdr.Get(headerTraceID),
	}
	if traceEnv {
		// Unset when absent, so that no invoke sees the trace of another;
		// the AWS SDK's recursion detection reads it.
		if inv.traceID == "" {
			os.Unsetenv("_X_AMZN_TRACE_ID")
		} else {
			os.Setenv("_X_AMZN_TRACE_ID", inv.traceID)
		}
	}
	prefix := c.base + "invocation/" + url.PathEscape(inv.requestID)
	ms, err := strconv.ParseInt(hdr.Get(headerDeadline), 10, 64)
	if err != nil {
		return c.report(prefix+"/error", errorFailure(fmt.Errorf("failed to parse deadline: %v", err)))
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.UnixMilli(ms))
	defer cancel()
	ctx = context.WithValue(ctx, contextKey{}, inv)

	response, fail := call(ctx, h, payload)
	if fail == nil {
		// application/octet-stream, as aws-lambda-go sent a handler's bytes.
		return c.post(prefix+"/response", response, "application/octet-stream", "")
	}
	if err := c.report(prefix+"/error", fail); err != nil {
		return err
	}
	if fail.panicked {
		return errPanicked
	}
	return nil
}

// call runs the handler, turning its error or its panic into a failure.
func call(ctx context.Context, h Handler, payload []byte) (response []byte, fail *failure) {
	defer func() {
		if v := recover(); v != nil {
			fail = panicFailure(v)
		}
	}()
	response, err := h(ctx, payload)
	if err != nil {
		return nil, errorFailure(err)
	}
	return response, nil
}

// report logs the failure, as aws-lambda-go did — through the log package,
// so through slog's default handler if the program set one — and posts it
// to url.
func (c *client) report(url string, f *failure) error {
	body := f.body()
	log.Printf("%s", body)
	return c.post(url, body, "application/json", f.Type)
}
