package functions

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// TestAnInvokeNamesItsLinesAndParkedRecords: aws-lambda-go hands the
// function the invoke's request ID and trace header, and the lines of the
// invoke — each failed record's, the batch's, the EMF line — and the
// records it parks carry them. The emulator drops trace headers, so the
// function runs against a runtime API of the test's own.
func TestAnInvokeNamesItsLinesAndParkedRecords(t *testing.T) {
	c := testenv.Cache(t)
	ns := rand.Text()
	setKeys(t, c, "cache:product:"+ns)
	failures, env := failureQueue(t)
	inv := rie.Invocation{RequestID: "req-" + ns, TraceID: "Root=1-67891233-abcdef012345678912345678;Parent=53995c3f42cd8ad8;Sampled=1"}
	payload, _ := json.Marshal(lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{
		sqsMessage("good", `{"entity":"product","id":"`+ns+`"}`), sqsMessage("poison", `{"entity":"product"}`)}})
	api := newRuntimeAPI(t, inv, payload)
	var out testenv.Log
	fn := exec.Command(binary("sqs-invalidate"))
	fn.Env = append(append(append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+api.addr, "SECOND_DELETE_QUEUE_URL="), env...), testenv.WorkerCacheConfig(t).Env()...)
	fn.Stdout, fn.Stderr = &out, &out
	if err := fn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fn.Process.Kill(); _ = fn.Wait() })
	select {
	case resp := <-api.responses:
		if resp != `{"batchItemFailures":[]}` {
			t.Fatalf("response %s: want no failures: the poison message is parked", resp)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no response:\n%s", out.String())
	}
	requireGone(t, c, "cache:product:"+ns)
	if p := parked(t, failures, 1); len(p) != 1 || p[0].RequestID != inv.RequestID {
		t.Fatalf("parked %+v: want the poison message with request ID %s", p, inv.RequestID)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		var l struct {
			Msg       string          `json:"msg"`
			AWS       json.RawMessage `json:"_aws"`
			RequestID string          `json:"request_id"`
			TraceID   string          `json:"trace_id"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		kind := l.Msg
		if l.AWS != nil {
			kind, l.TraceID = "emf", inv.TraceID // the EMF line names the request only
		}
		if kind != "batch" && kind != "record failed" && kind != "emf" {
			continue // init's lines, before any invoke
		}
		seen[kind] = true
		if l.RequestID != inv.RequestID || l.TraceID != inv.TraceID {
			t.Errorf("line %s: want request_id %s and trace_id %s", line, inv.RequestID, inv.TraceID)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("lines seen %v, want a batch line, a failed record's and an EMF line:\n%s", seen, out.String())
	}
}

// runtimeAPI is a Lambda runtime API that hands out one invoke, with the
// headers Lambda sends, and takes the extension aws-lambda-go registers for
// SIGTERM.
type runtimeAPI struct {
	addr      string
	responses chan string
}

func newRuntimeAPI(t *testing.T, inv rie.Invocation, payload []byte) *runtimeAPI {
	api := &runtimeAPI{responses: make(chan string, 1)}
	handedOut := make(chan struct{}, 1)
	handedOut <- struct{}{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/2018-06-01/runtime/invocation/next":
			select {
			case <-handedOut:
			case <-r.Context().Done(): // one invoke only: the next waits until the end
				return
			}
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.RequestID)
			h.Set("Lambda-Runtime-Trace-Id", inv.TraceID)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(10*time.Second).UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:sqs-invalidate")
			_, _ = w.Write(payload)
		case p == "/2018-06-01/runtime/invocation/"+inv.RequestID+"/response":
			body, _ := io.ReadAll(r.Body)
			api.responses <- string(body)
			w.WriteHeader(http.StatusAccepted)
		case p == "/2020-01-01/extension/register":
			w.Header().Set("Lambda-Extension-Identifier", "sigterm")
			_, _ = io.WriteString(w, "{}")
		case p == "/2020-01-01/extension/event/next":
			<-r.Context().Done()
		default:
			t.Errorf("the function called %s %s", r.Method, p)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	api.addr = srv.Listener.Addr().String()
	return api
}

// TestSIGTERMLetsTheInvokeInFlightFinish: Lambda sends SIGTERM before it
// stops an environment once the function registered for it. An invoke in
// flight then — here held by a slow SQS, its second delete in the send —
// still answers, and only then are the connections closed. Without the
// registration Go's default for SIGTERM kills the process mid-invoke.
func TestSIGTERMLetsTheInvokeInFlightFinish(t *testing.T) {
	c := testenv.Cache(t)
	moto, err := url.Parse(testenv.Getenv(t, "AWS_ENDPOINT_URL"))
	if err != nil {
		t.Fatal(err)
	}
	arrived := make(chan struct{}, 100)
	proxy := httputil.NewSingleHostReverseProxy(moto)
	slowSQS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(1500 * time.Millisecond)
		proxy.ServeHTTP(w, r)
	}))
	defer slowSQS.Close()
	again := createQueue(t, awsenv.SQS(t), "test-again-"+strings.ToLower(rand.Text()[:12]), nil)
	ns := rand.Text()
	setKeys(t, c, "cache:product:"+ns)
	var out testenv.Log
	fn := emulator(t, "sqs-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Output: &out,
		Env: []string{"AWS_ENDPOINT_URL=" + slowSQS.URL, "SECOND_DELETE_QUEUE_URL=" + again, "SECOND_DELETE_DELAY=1s"}})

	answered := make(chan error, 1)
	go func() {
		resp, err := fn.Invoke(t.Context(), lambdaevent.SQSEvent{Records: []lambdaevent.SQSMessage{sqsMessage("m1", `{"entity":"product","id":"`+ns+`"}`)}})
		if err == nil && string(resp) != `{"batchItemFailures":[]}` {
			err = &rie.FunctionError{Type: "unexpected response", Message: string(resp)}
		}
		answered <- err
	}()
	select {
	case <-arrived: // the keys are deleted; the second delete is being sent
	case <-time.After(20 * time.Second):
		t.Fatalf("the function sent no second delete:\n%s", out.String())
	}
	pid, err := fn.FunctionPID()
	if err != nil {
		t.Fatal(err)
	}
	ports := strings.Fields(testenv.Getenv(t, "CACHE_PORTS"))
	if n := connections(t, pid, ports); n == 0 {
		t.Fatal("the function holds no connection to the cache before SIGTERM")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the invoke in flight at SIGTERM: %v\n%s", err, out.String())
	}
	const closed = "SIGTERM: the invokes in flight are done, the connections closed"
	eventually(t, 5*time.Second, "no line saying the connections were closed", func() bool { return strings.Contains(out.String(), closed) })
	if s := out.String(); strings.Index(s, `"msg":"batch"`) > strings.Index(s, closed) {
		t.Fatalf("the connections were closed before the batch was done:\n%s", s)
	}
	eventually(t, 5*time.Second, "the function still holds cache connections", func() bool { return connections(t, pid, ports) == 0 })
	requireGone(t, c, "cache:product:"+ns)
}

// connections counts the established TCP connections of process pid to
// 127.0.0.1 on any of ports, from /proc.
func connections(t *testing.T, pid int, ports []string) int {
	t.Helper()
	fds, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	sockets := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, "socket:[") {
			sockets[strings.Trim(target[len("socket:"):], "[]")] = true
		}
	}
	remote := map[string]bool{}
	for _, p := range ports {
		n, _ := strconv.Atoi(p)
		remote["0100007F:"+strings.ToUpper(strconv.FormatInt(int64(n), 16))] = true
	}
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, line := range strings.Split(string(table), "\n")[1:] {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if f := strings.Fields(line); len(f) > 9 && remote[f[2]] && f[3] == "01" && sockets[f[9]] {
			count++
		}
	}
	return count
}
