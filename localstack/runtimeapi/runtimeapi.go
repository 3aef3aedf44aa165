// Package runtimeapi is a stand-in for Lambda's Runtime API that hands one
// function process many invokes at once, as Lambda Managed Instances do:
// the process is started with AWS_LAMBDA_MAX_CONCURRENCY, and aws-lambda-go
// then polls for invokes from that many goroutines. The Runtime Interface
// Emulator (localstack/rie) hands out one invoke at a time.
//
// Where it differs from Lambda: a process that exits is started again at
// once, and the invokes it held fail with Runtime.ExitError, as Lambda
// reports them (the event source then retries them); there are no
// timeouts but the caller's context, no X-Ray, and the extensions API
// answers only what aws-lambda-go asks of it (its SIGTERM extension).
package runtimeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// FunctionError is an invoke whose function returned an error, or whose
// process exited while it held it (Runtime.ExitError).
type FunctionError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// Options configure a Runtime.
type Options struct {
	// Concurrency is AWS_LAMBDA_MAX_CONCURRENCY: the invokes the process
	// is handed at once. Default 8.
	Concurrency int
	// Env is the function's environment, beside this process's own.
	Env []string
	// Output receives the function's output. Default os.Stderr.
	Output io.Writer
}

// Runtime is the stand-in and the function process it runs.
type Runtime struct {
	bootstrap string
	opts      Options
	srv       *http.Server
	addr      string
	queue     chan *invoke
	stopping  chan struct{}
	stopOnce  sync.Once

	mu       sync.Mutex
	held     map[string]*invoke // handed to the process, not answered yet
	cmd      *exec.Cmd
	exited   chan struct{}
	starts   int
	requests int
}

type invoke struct {
	id      string
	payload []byte
	result  chan result
}

type result struct {
	body []byte
	err  error
}

// Start serves the Runtime API on a free loopback port and starts
// bootstrap against it.
func Start(bootstrap string, opts Options) (*Runtime, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Output == nil {
		opts.Output = os.Stderr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Runtime{bootstrap: bootstrap, opts: opts, addr: l.Addr().String(), queue: make(chan *invoke),
		stopping: make(chan struct{}), held: map[string]*invoke{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", r.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", r.answer(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", r.answer(true))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		fmt.Fprintf(r.opts.Output, "runtimeapi: init error: %s\n", body)
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("POST /2020-01-01/extension/register", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Lambda-Extension-Identifier", "sigterm")
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /2020-01-01/extension/event/next", func(w http.ResponseWriter, req *http.Request) {
		select { // only a shutdown: the process is stopped with SIGTERM
		case <-r.stopping:
		case <-req.Context().Done():
			return
		}
		_, _ = w.Write([]byte(`{"eventType":"SHUTDOWN"}`))
	})
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	if err := r.start(); err != nil {
		r.srv.Close()
		return nil, err
	}
	return r, nil
}

// start starts the function process; when it exits, its invokes fail and
// another starts, as Lambda starts another execution environment.
func (r *Runtime) start() error {
	cmd := exec.Command(r.bootstrap)
	cmd.Env = append(append(os.Environ(), r.opts.Env...), "AWS_LAMBDA_RUNTIME_API="+r.addr,
		"AWS_LAMBDA_MAX_CONCURRENCY="+strconv.Itoa(r.opts.Concurrency), "AWS_LAMBDA_FUNCTION_NAME=runtimeapi",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024")
	cmd.Stdout, cmd.Stderr = r.opts.Output, r.opts.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.bootstrap, err)
	}
	exited := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.exited = cmd, exited
	r.starts++
	r.mu.Unlock()
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		held := r.held
		r.held = map[string]*invoke{}
		r.mu.Unlock()
		for _, inv := range held {
			inv.result <- result{err: &FunctionError{Type: "Runtime.ExitError", Message: fmt.Sprintf("the process exited with its invoke in flight: %v", err)}}
		}
		close(exited)
		select {
		case <-r.stopping:
		default:
			if err := r.start(); err != nil {
				fmt.Fprintf(r.opts.Output, "runtimeapi: %v\n", err)
			}
		}
	}()
	return nil
}

func (r *Runtime) next(w http.ResponseWriter, req *http.Request) {
	var inv *invoke
	select {
	case inv = <-r.queue:
	case <-r.stopping:
		http.Error(w, "stopping", http.StatusGone)
		return
	case <-req.Context().Done():
		return
	}
	r.mu.Lock()
	r.held[inv.id] = inv
	r.mu.Unlock()
	w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.id)
	w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
	w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:runtimeapi")
	w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000")
	if _, err := w.Write(inv.payload); err != nil {
		r.fail(inv.id, err)
	}
}

func (r *Runtime) answer(failed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		r.mu.Lock()
		inv := r.held[req.PathValue("id")]
		delete(r.held, req.PathValue("id"))
		r.mu.Unlock()
		if inv == nil {
			http.Error(w, "no such invoke", http.StatusBadRequest)
			return
		}
		res := result{body: body}
		switch {
		case err != nil:
			// The process died writing its answer: Lambda reports the
			// invoke as the exit's, not as a half-read answer.
			res.err = &FunctionError{Type: "Runtime.ExitError", Message: fmt.Sprintf("the process exited answering its invoke: %v", err)}
		case failed:
			fe := &FunctionError{}
			if json.Unmarshal(body, fe) != nil || fe.Type == "" {
				fe.Type, fe.Message = "Unhandled", string(body)
			}
			res.err = fe
		}
		inv.result <- res
		w.WriteHeader(http.StatusAccepted)
	}
}

// fail ends an invoke the process could not be handed: it died reading it.
func (r *Runtime) fail(id string, err error) {
	r.mu.Lock()
	inv := r.held[id]
	delete(r.held, id)
	r.mu.Unlock()
	if inv != nil {
		inv.result <- result{err: &FunctionError{Type: "Runtime.ExitError", Message: fmt.Sprintf("the process exited taking its invoke: %v", err)}}
	}
}

// Invoke hands event to the next poller of the process and returns its
// response; a function error, or the process exiting with it, comes back
// as a *FunctionError.
func (r *Runtime) Invoke(ctx context.Context, event any) ([]byte, error) {
	payload, err := json.Marshal(event)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.requests++
	inv := &invoke{id: "req-" + strconv.Itoa(r.requests), payload: payload, result: make(chan result, 1)}
	r.mu.Unlock()
	select {
	case r.queue <- inv:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.stopping:
		return nil, errors.New("runtimeapi: stopped")
	}
	select {
	case res := <-inv.result:
		return res.body, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Signal sends sig to the function process: SIGQUIT ends a Go process as
// an unrecovered panic does, its goroutines' stacks printed, every invoke
// it holds lost.
func (r *Runtime) Signal(sig syscall.Signal) error {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	return cmd.Process.Signal(sig)
}

// Starts is how many processes were started: one, and one after each exit.
func (r *Runtime) Starts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

// Stop stops the process (SIGTERM, then SIGKILL after 5 s) and the server.
func (r *Runtime) Stop() {
	r.stopOnce.Do(func() {
		close(r.stopping)
		r.mu.Lock()
		cmd, exited := r.cmd, r.exited
		r.mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		r.srv.Close()
	})
}
