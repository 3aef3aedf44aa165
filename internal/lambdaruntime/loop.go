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
// the invokes in flight and returns that failure. n is more than 1 only
// where Lambda sends several invokes to one process
// (AWS_LAMBDA_MAX_CONCURRENCY, on managed instances). A loop waiting for
// an event is left waiting: the process exits, and an event handed out
// then fails as it would with any runtime that exits.
func run(c *client, h Handler, n int) error {
	if n <= 1 {
		return c.loop(h, true, nil)
	}
	f := &flight{}
	f.idle.L = &f.mu
	failed := make(chan error, n)
	for range n {
		go func() { failed <- c.loop(h, false, f) }()
	}
	err := <-failed
	f.stop()
	return err
}

// flight counts the invokes in flight, so that a failure waits for them.
type flight struct {
	mu      sync.Mutex
	busy    int
	stopped bool
	idle    sync.Cond
}

// start counts an invoke in, unless the loops are stopping.
func (f *flight) start() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.busy++
	}
	return !f.stopped
}

func (f *flight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy--; f.busy == 0 {
		f.idle.Broadcast()
	}
}

// stop lets no invoke start, and waits for those in flight.
func (f *flight) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	for f.busy > 0 {
		f.idle.Wait()
	}
}

// loop serves one invoke after the other until it cannot go on: the
// runtime API failed, or the handler panicked. With f, it stops before an
// invoke once f is stopping. traceEnv sets _X_AMZN_TRACE_ID, which is only
// right with one invoke at a time.
func (c *client) loop(h Handler, traceEnv bool, f *flight) error {
	var payload bytes.Buffer
	for {
		hdr, err := c.nextInvoke(context.Background(), &payload)
		if err != nil {
			return err
		}
		if f != nil && !f.start() {
			return nil
		}
		err = c.invoke(hdr, payload.Bytes(), h, traceEnv)
		if f != nil {
			f.done()
		}
		if err != nil {
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
