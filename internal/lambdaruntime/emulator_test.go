package lambdaruntime

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEmulator runs testdata/echo under the Lambda Runtime Interface
// Emulator ($RIE_BIN, else aws-lambda-rie on PATH): the real runtime API's
// answers, not the fake's.
func TestEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a function and runs the emulator")
	}
	rie := os.Getenv("RIE_BIN")
	if rie == "" {
		var err error
		if rie, err = exec.LookPath("aws-lambda-rie"); err != nil {
			t.Skip("no emulator: set RIE_BIN or put aws-lambda-rie on PATH")
		}
	}
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if out, err := exec.Command("go", "build", "-o", bootstrap, "./testdata/echo").CombinedOutput(); err != nil {
		t.Fatalf("build testdata/echo: %v\n%s", err, out)
	}

	invoke := startEmulator(t, rie, bootstrap)
	if status, body := invoke(`"hi"`); status != 200 || body != `"hi"` {
		t.Errorf("echo: %d %s", status, body)
	}
	var info struct {
		RequestID, ARN, TraceID, TraceEnv string
		Traced                            bool
		Remaining                         float64
		PID                               int
	}
	checkContext := func() {
		t.Helper()
		status, body := invoke(`"context"`)
		if err := json.Unmarshal([]byte(body), &info); status != 200 || err != nil {
			t.Fatalf("context: %d %s", status, body)
		}
		if info.RequestID == "" || !strings.Contains(info.ARN, ":function:") ||
			info.Remaining <= 0 || info.Remaining > 7 || info.Traced {
			t.Errorf("context: %s, want a request ID, the ARN, a deadline within the 7 s timeout, no trace", body)
		}
	}
	checkContext()
	first := info.PID
	if status, body := invoke(`"error"`); status != 200 ||
		body != `{"errorMessage":"message 1: cache down","errorType":"RecordsFailed"}` {
		t.Errorf("error: %d %s", status, body)
	}
	// The emulator answers 502 once the function has exited, as it does
	// for aws-lambda-go, but with the error posted before.
	if _, body := invoke(`"panic"`); !strings.HasPrefix(body, `{"errorMessage":"boom","errorType":"string","stackTrace":[{"path":"echo/main.go"`) {
		t.Errorf("panic: %s", body)
	}
	checkContext()
	if info.PID == first {
		t.Error("the function process did not exit after the panic")
	}

	invoke = startEmulator(t, rie, bootstrap, "ECHO_INIT_ERROR=no cache endpoint")
	if _, body := invoke(`"hi"`); body != `{"errorMessage":"no cache endpoint","errorType":"errorString"}` {
		t.Errorf("init error: %s", body)
	}
}

// startEmulator runs bootstrap under the emulator, with a 7 s function
// timeout, until the test ends, and returns how to invoke it.
func startEmulator(t *testing.T, rie, bootstrap string, env ...string) func(payload string) (int, string) {
	t.Helper()
	addr, api := freeAddr(t), freeAddr(t)
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", api, bootstrap)
	cmd.Env = append(append(os.Environ(), "AWS_LAMBDA_FUNCTION_TIMEOUT=7"), env...)
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	// A group of its own, so that the function goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("emulator output:\n%s", out)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the emulator did not listen within 10 s")
		}
	}
	url := "http://" + addr + "/2015-03-31/functions/function/invocations"
	return func(payload string) (int, string) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(payload))
		if err != nil {
			t.Fatalf("invoke %s: %v", payload, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
