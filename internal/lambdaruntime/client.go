package lambdaruntime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
)

const (
	headerRequestID   = "Lambda-Runtime-Aws-Request-Id"
	headerDeadline    = "Lambda-Runtime-Deadline-Ms"
	headerFunctionARN = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID     = "Lambda-Runtime-Trace-Id"
	headerErrorType   = "Lambda-Runtime-Function-Error-Type"
)

var userAgent = "invalidator-lambdaruntime/" + runtime.Version()

// client talks to the runtime API at one address.
type client struct {
	base string // http://host:port/2018-06-01/runtime/
	next string // base + "invocation/next", built once
	http *http.Client
}

// newClient keeps up to conns connections alive, one per concurrent loop.
// No timeout: GET next blocks until an event arrives, however long that is,
// and the runtime API is local. The zero Transport's nil Proxy matters: an
// HTTP_PROXY the function sets for its own calls must not catch these.
func newClient(addr string, conns int) *client {
	base := "http://" + addr + "/2018-06-01/runtime/"
	return &client{
		base: base,
		next: base + "invocation/next",
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}},
	}
}

// nextInvoke waits for the next event and reads its payload into buf,
// reused from one invoke to the next.
func (c *client) nextInvoke(ctx context.Context, buf *bytes.Buffer) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.next, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("lambdaruntime: get next invoke: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError("GET", c.next, resp)
	}
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, fmt.Errorf("lambdaruntime: read invoke payload: %w", err)
	}
	return resp.Header, nil
}

// post sends body to url; errorType, when set, goes in the header the
// runtime API reads a function error's type from.
func (c *client) post(url string, body []byte, contentType, errorType string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Content-Type", contentType)
	if errorType != "" {
		req.Header.Set(headerErrorType, errorType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("lambdaruntime: post %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return statusError("POST", url, resp)
	}
	// Read to the end, so the connection is kept for the next call.
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// statusError names an unexpected answer, with the start of the runtime
// API's own explanation.
func statusError(method, url string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("lambdaruntime: %s %s: status %d: %s", method, url, resp.StatusCode, bytes.TrimSpace(msg))
}
