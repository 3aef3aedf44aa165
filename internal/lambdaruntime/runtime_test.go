package lambdaruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// captureLog takes the log package's output for the test.
func captureLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(&buf)
	log.SetFlags(0)
	t.Cleanup(func() { log.SetOutput(out); log.SetFlags(flags) })
	return &buf
}

func TestResponse(t *testing.T) {
	f := newFakeAPI(t, event{id: "req-1", payload: `{"n":1}`}, event{id: "req-2", payload: `{"n":2}`})
	posts := f.serveAll(t, func(ctx context.Context, payload []byte) ([]byte, error) {
		return append([]byte("got "), payload...), nil
	})
	want := []posted{
		{path: "invocation/req-1/response", contentType: "application/octet-stream", body: `got {"n":1}`},
		{path: "invocation/req-2/response", contentType: "application/octet-stream", body: `got {"n":2}`},
	}
	if fmt.Sprint(posts) != fmt.Sprint(want) {
		t.Errorf("posted %q, want %q", posts, want)
	}
}

type RecordsFailed []string

func (e RecordsFailed) Error() string { return strings.Join(e, "; ") }

type pointerError struct{ msg string }

func (e *pointerError) Error() string { return e.msg }

func TestError(t *testing.T) {
	logged := captureLog(t)
	errs := map[string]error{
		"value":   RecordsFailed{"message 1: down", "message 2: down"},
		"pointer": &pointerError{"bad \"input\"\n"},
		"new":     errors.New("plain"),
		"wrapped": fmt.Errorf("wrapped: %w", errors.New("plain")),
	}
	f := newFakeAPI(t, event{id: "value"}, event{id: "pointer"}, event{id: "new"}, event{id: "wrapped"})
	posts := f.serveAll(t, func(ctx context.Context, payload []byte) ([]byte, error) {
		return []byte("unused"), errs[RequestID(ctx)]
	})
	want := []struct{ id, typ, msg string }{
		{"value", "RecordsFailed", "message 1: down; message 2: down"},
		{"pointer", "pointerError", "bad \"input\"\n"},
		{"new", "errorString", "plain"},
		{"wrapped", "wrapError", "wrapped: plain"},
	}
	if len(posts) != len(want) {
		t.Fatalf("posted %q, want %d errors", posts, len(want))
	}
	for i, w := range want {
		p := posts[i]
		var body map[string]any
		if err := json.Unmarshal([]byte(p.body), &body); err != nil {
			t.Fatalf("%s: body %q: %v", w.id, p.body, err)
		}
		wantBody := map[string]any{"errorMessage": w.msg, "errorType": w.typ}
		if p.path != "invocation/"+w.id+"/error" || p.contentType != "application/json" ||
			p.errorType != w.typ || fmt.Sprint(body) != fmt.Sprint(wantBody) {
			t.Errorf("%s: posted %q, want errorType %s, message %q, to invocation/%[1]s/error", w.id, p, w.typ, w.msg)
		}
		if !strings.Contains(logged.String(), p.body+"\n") {
			t.Errorf("%s: %s not logged, as aws-lambda-go did; log:\n%s", w.id, p.body, logged)
		}
	}
}

func TestContext(t *testing.T) {
	deadline := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	f := newFakeAPI(t, event{
		id:       "req-1",
		arn:      "arn:aws:lambda:eu-west-1:123456789012:function:sqs:live",
		trace:    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
		deadline: strconv.FormatInt(deadline.UnixMilli(), 10),
	})
	var got []string
	var gotDeadline time.Time
	f.serveAll(t, func(ctx context.Context, payload []byte) ([]byte, error) {
		gotDeadline, _ = ctx.Deadline()
		got = []string{RequestID(ctx), InvokedFunctionARN(ctx), TraceID(ctx)}
		return nil, nil
	})
	if !gotDeadline.Equal(deadline) {
		t.Errorf("deadline %v, want %v", gotDeadline, deadline)
	}
	want := []string{"req-1", "arn:aws:lambda:eu-west-1:123456789012:function:sqs:live",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("RequestID, InvokedFunctionARN, TraceID = %q, want %q", got, want)
	}
	ctx := context.Background()
	if RequestID(ctx) != "" || InvokedFunctionARN(ctx) != "" || TraceID(ctx) != "" {
		t.Error("accessors outside an invoke are not empty")
	}
}

func TestExpiredDeadline(t *testing.T) {
	past := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	f := newFakeAPI(t, event{id: "late", deadline: past})
	var err error
	f.serveAll(t, func(ctx context.Context, payload []byte) ([]byte, error) {
		<-ctx.Done() // at once
		err = ctx.Err()
		return nil, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx.Err() = %v, want DeadlineExceeded", err)
	}
}

func TestBadDeadline(t *testing.T) {
	captureLog(t)
	f := newFakeAPI(t, event{id: "bad", deadline: "soon"}, event{id: "good"})
	var served []string
	posts := f.serveAll(t, func(ctx context.Context, payload []byte) ([]byte, error) {
		served = append(served, RequestID(ctx))
		return nil, nil
	})
	if fmt.Sprint(served) != "[good]" {
		t.Errorf("handler served %q, want only the invoke with a deadline", served)
	}
	if len(posts) != 2 || posts[0].path != "invocation/bad/error" || posts[0].errorType != "errorString" ||
		!strings.Contains(posts[0].body, "failed to parse deadline") {
		t.Errorf("posted %q, want the deadline's error, as aws-lambda-go reported it", posts)
	}
}

func TestTraceEnv(t *testing.T) {
	t.Setenv("_X_AMZN_TRACE_ID", "stale")
	f := newFakeAPI(t, event{id: "traced", trace: "Root=1-abc"}, event{id: "untraced"})
	var got []string
	f.serveAll(t, func(ctx context.Context, payload []byte) ([]byte, error) {
		v, ok := os.LookupEnv("_X_AMZN_TRACE_ID")
		got = append(got, fmt.Sprintf("%s %v", v, ok))
		return nil, nil
	})
	if want := []string{"Root=1-abc true", " false"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("_X_AMZN_TRACE_ID, set = %q, want %q: set from the invoke, unset without", got, want)
	}
}

func panicking() { panic("boom") }

func TestPanic(t *testing.T) {
	logged := captureLog(t)
	var traceback bytes.Buffer
	stderr = &traceback
	t.Cleanup(func() { stderr = os.Stderr })
	f := newFakeAPI(t, event{id: "req-1"}, event{id: "req-2"})
	err := f.client().loop(func(ctx context.Context, payload []byte) ([]byte, error) {
		panicking()
		return nil, nil
	}, true, nil)
	if !errors.Is(err, errPanicked) {
		t.Fatalf("loop: %v, want errPanicked", err)
	}
	if len(f.events) != 1 {
		t.Error("the loop went on after a panic")
	}
	posts := f.posted()
	if len(posts) != 1 || posts[0].path != "invocation/req-1/error" || posts[0].errorType != "string" {
		t.Fatalf("posted %q, want the panic as req-1's error", posts)
	}
	var body failure
	if err := json.Unmarshal([]byte(posts[0].body), &body); err != nil {
		t.Fatal(err)
	}
	if body.Message != "boom" || body.Type != "string" || len(body.StackTrace) < 2 {
		t.Fatalf("posted %s, want message boom, type string and the stack", posts[0].body)
	}
	// The stack starts where the handler panicked, as in a traceback.
	if top := body.StackTrace[0]; top.Label != "panicking" || !strings.HasSuffix(top.Path, "lambdaruntime/runtime_test.go") {
		t.Errorf("top frame %+v, want panicking in runtime_test.go; stack %s", top, posts[0].body)
	}
	if !strings.Contains(logged.String(), posts[0].body) {
		t.Errorf("the panic's error was not logged: %s", logged)
	}
	if tb := traceback.String(); !strings.HasPrefix(tb, "panic: boom\n") || !strings.Contains(tb, "lambdaruntime.panicking(") {
		t.Errorf("stderr: %s, want the goroutine's traceback", tb)
	}
}

func TestPanicNil(t *testing.T) {
	captureLog(t)
	stderr = new(bytes.Buffer)
	t.Cleanup(func() { stderr = os.Stderr })
	f := newFakeAPI(t, event{id: "req-1"})
	err := f.client().loop(func(ctx context.Context, payload []byte) ([]byte, error) {
		panic(nil)
	}, true, nil)
	if posts := f.posted(); !errors.Is(err, errPanicked) || len(posts) != 1 || posts[0].errorType != "PanicNilError" {
		t.Errorf("loop: %v, posted %q, want panic(nil) reported as a PanicNilError", err, posts)
	}
}

func TestNewFrame(t *testing.T) {
	for _, c := range []struct {
		fn, file, path, label string
	}{
		{"pkg/sub.Type.Method", "/home/user/src/pkg/sub/file.go", "pkg/sub/file.go", "Type.Method"},
		{"github.com/o/r/worker.(*W).handle.func1", "github.com/o/r/worker/sqs.go", "github.com/o/r/worker/sqs.go", "(*W).handle.func1"},
		{"main.main", "/src/cmd/main.go", "cmd/main.go", "main"},
		{"a/b/c/d.f", "/x/d.go", "/x/d.go", "f"}, // fewer elements than the import path: kept whole
	} {
		got := newFrame(runtime.Frame{Function: c.fn, File: c.file, Line: 7})
		if got != (frame{Path: c.path, Line: 7, Label: c.label}) {
			t.Errorf("newFrame(%s, %s) = %+v, want %s %s", c.fn, c.file, got, c.path, c.label)
		}
	}
}

func TestRuntimeAPIFailures(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		f := newFakeAPI(t)
		f.srv.Close()
		err := f.client().loop(nil, true, nil)
		if err == nil || !strings.Contains(err.Error(), "get next invoke") {
			t.Errorf("loop: %v, want the failed GET", err)
		}
	})
	t.Run("response refused", func(t *testing.T) {
		f := newFakeAPI(t, event{id: "req-1"}, event{id: "req-2"})
		f.status = http.StatusRequestEntityTooLarge
		err := f.client().loop(func(ctx context.Context, payload []byte) ([]byte, error) {
			return []byte("big"), nil
		}, true, nil)
		if err == nil || !strings.Contains(err.Error(), "status 413") || len(f.events) != 1 {
			t.Errorf("loop: %v, want it ended by the 413", err)
		}
	})
	t.Run("error refused", func(t *testing.T) {
		captureLog(t)
		f := newFakeAPI(t, event{id: "req-1"}, event{id: "req-2"})
		f.status = http.StatusInternalServerError
		err := f.client().loop(func(ctx context.Context, payload []byte) ([]byte, error) {
			return nil, errors.New("failed")
		}, true, nil)
		if err == nil || !strings.Contains(err.Error(), "status 500") || len(f.events) != 1 {
			t.Errorf("loop: %v, want it ended by the 500", err)
		}
	})
}

// TestConcurrency: with AWS_LAMBDA_MAX_CONCURRENCY, invokes run at once,
// and _X_AMZN_TRACE_ID, which could only name one, is left alone.
func TestConcurrency(t *testing.T) {
	const n = 3
	t.Setenv("_X_AMZN_TRACE_ID", "untouched")
	f := newFakeAPI(t, event{id: "a", trace: "1"}, event{id: "b", trace: "2"}, event{id: "c", trace: "3"})
	var mu sync.Mutex
	running, all := 0, make(chan struct{})
	err := run(newClient(f.srv.Listener.Addr().String(), n), func(ctx context.Context, payload []byte) ([]byte, error) {
		mu.Lock()
		if running++; running == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			return nil, errors.New("the invokes did not run at once")
		}
		if v := os.Getenv("_X_AMZN_TRACE_ID"); v != "untouched" {
			return nil, fmt.Errorf("_X_AMZN_TRACE_ID = %q", v)
		}
		return []byte(TraceID(ctx)), nil
	}, n)
	if err == nil || !strings.Contains(err.Error(), "status 410") {
		t.Errorf("run: %v, want the fake's 410", err)
	}
	posts := f.posted()
	if len(posts) != n {
		t.Fatalf("posted %q, want %d responses", posts, n)
	}
	for _, p := range posts {
		if !strings.HasSuffix(p.path, "/response") {
			t.Errorf("posted %q", p)
		}
	}
}

// TestConcurrentPanic: one panic ends all the loops, once the invokes in
// flight elsewhere are answered.
func TestConcurrentPanic(t *testing.T) {
	captureLog(t)
	stderr = new(bytes.Buffer)
	t.Cleanup(func() { stderr = os.Stderr })
	f := newFake(t, true, event{id: "slow"}) // then waits
	// run leaves the loop that waits for an event waiting; the end of the
	// events lets it go, before the server closes.
	t.Cleanup(func() { close(f.events) })
	reported := make(chan struct{})
	f.onPost = func(p posted) {
		if p.path == "invocation/panics/error" {
			close(reported)
		}
	}
	err := run(newClient(f.srv.Listener.Addr().String(), 2), func(ctx context.Context, payload []byte) ([]byte, error) {
		if RequestID(ctx) == "panics" {
			panic("boom")
		}
		f.events <- event{id: "panics"} // while this one is in flight
		<-reported
		return []byte("done"), nil
	}, 2)
	if !errors.Is(err, errPanicked) {
		t.Errorf("run: %v, want errPanicked", err)
	}
	posts := f.posted()
	paths := make([]string, len(posts))
	for i, p := range posts {
		paths[i] = p.path
	}
	if strings.Join(paths, " ") != "invocation/panics/error invocation/slow/response" {
		t.Errorf("posted %q, want the panic, then the slow invoke's response", paths)
	}
}

// The helper process runs Start and InitError, which exit.
func TestMain(m *testing.M) {
	switch os.Getenv("LAMBDARUNTIME_HELPER") {
	case "start":
		Start(func(ctx context.Context, payload []byte) ([]byte, error) {
			if string(payload) == "panic" {
				panic("boom")
			}
			return payload, nil
		})
	case "init-error":
		InitError(RecordsFailed{"no cache endpoint"})
	}
	os.Exit(m.Run())
}

func helper(t *testing.T, mode, api string) (exitCode int, output string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LAMBDARUNTIME_HELPER="+mode, "AWS_LAMBDA_RUNTIME_API="+api)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("helper %s: %v, want it to exit with an error; output:\n%s", mode, err, out)
	}
	return exit.ExitCode(), string(out)
}

func TestStartExits(t *testing.T) {
	t.Run("no runtime API", func(t *testing.T) {
		code, out := helper(t, "start", "")
		if code != 1 || !strings.Contains(out, "AWS_LAMBDA_RUNTIME_API is not set") {
			t.Errorf("exit %d, output %s", code, out)
		}
	})
	t.Run("runtime API gone", func(t *testing.T) {
		f := newFakeAPI(t, event{id: "req-1", payload: "hi"})
		code, out := helper(t, "start", f.srv.Listener.Addr().String())
		if posts := f.posted(); code != 1 || !strings.Contains(out, "status 410") ||
			len(posts) != 1 || posts[0].body != "hi" {
			t.Errorf("exit %d, posted %q, output %s", code, posts, out)
		}
	})
	t.Run("panic", func(t *testing.T) {
		f := newFakeAPI(t, event{id: "req-1", payload: "panic"}, event{id: "req-2"})
		code, out := helper(t, "start", f.srv.Listener.Addr().String())
		if posts := f.posted(); code != 1 || len(posts) != 1 || posts[0].path != "invocation/req-1/error" ||
			!strings.Contains(out, "panic: boom") || !strings.Contains(out, errPanicked.Error()) {
			t.Errorf("exit %d, posted %q, output %s", code, posts, out)
		}
	})
}

func TestInitError(t *testing.T) {
	f := newFakeAPI(t)
	code, out := helper(t, "init-error", f.srv.Listener.Addr().String())
	want := posted{path: "init/error", contentType: "application/json", errorType: "RecordsFailed",
		body: `{"errorMessage":"no cache endpoint","errorType":"RecordsFailed"}`}
	if posts := f.posted(); code != 1 || len(posts) != 1 || posts[0] != want {
		t.Errorf("exit %d, posted %q, want %q; output %s", code, posts, want, out)
	}
	code, out = helper(t, "init-error", "")
	if code != 1 || !strings.Contains(out, "no cache endpoint") {
		t.Errorf("outside Lambda: exit %d, output %s, want the error logged", code, out)
	}
}
