package rie

import (
	"bytes"
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
	"strings"
	"sync"
	"syscall"
	"time"
)

// FunctionError is an invoke whose function returned an error or crashed.
type FunctionError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// Emulator is one running emulator with its function.
type Emulator struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	done chan struct{}
}

// Options configure an emulator.
type Options struct {
	// Env is the function's environment, beside the emulator's own.
	Env []string
	// Timeout is the function timeout (AWS_LAMBDA_FUNCTION_TIMEOUT).
	// Default 30 s.
	Timeout time.Duration
	// Output receives the emulator's and the function's output. Default
	// os.Stderr.
	Output io.Writer
}

// Binary returns the emulator's path: $RIE_BIN, else aws-lambda-rie on
// PATH. make setup installs it, at the version it names, where env.sh
// points RIE_BIN.
func Binary() (string, error) {
	if bin := os.Getenv("RIE_BIN"); bin != "" {
		return bin, nil
	}
	bin, err := exec.LookPath("aws-lambda-rie")
	if err != nil {
		return "", errors.New("no Lambda Runtime Interface Emulator: run make setup, and . localstack/env.sh")
	}
	return bin, nil
}

// Start runs bootstrap under a new emulator on free loopback ports and
// waits until it accepts invokes. The function initialises on the first
// invoke, as in Lambda.
func Start(bootstrap string, opts Options) (*Emulator, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	// One emulator takes its ports at a time, until it listens on both:
	// ports free when asked for may be handed out again meanwhile, and a
	// driver starting emulators at once once saw one's invoke port taken
	// by another's runtime API, which answered every invoke 404.
	starting.Lock()
	defer starting.Unlock()
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Output == nil {
		opts.Output = os.Stderr
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	cmd := exec.Command(bin, "--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(ports[1]), bootstrap)
	cmd.Env = append(append(os.Environ(), opts.Env...),
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int(opts.Timeout/time.Second)))
	cmd.Stdout, cmd.Stderr = opts.Output, opts.Output
	// A group of its own, so Stop takes the function down too; and it dies
	// with this process, so a driver killed outright leaves none behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start emulator: %w", err)
	}
	e := &Emulator{cmd: cmd, url: "http://" + addr + "/2015-03-31/functions/function/invocations", done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(e.done) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if listening(addr) && listening("127.0.0.1:"+strconv.Itoa(ports[1])) {
			select {
			case <-e.done: // another process's ports
				return nil, errors.New("the emulator exited at start")
			default:
				return e, nil
			}
		}
		select {
		case <-e.done:
			return nil, errors.New("the emulator exited at start")
		default:
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, errors.New("the emulator did not listen within 10 s")
		}
	}
}

// Invocation names an invoke as Lambda does; the emulator hands both to
// the function. An empty request ID gets one made up by the emulator.
type Invocation struct {
	RequestID string // X-Amzn-RequestId
	TraceID   string // X-Amzn-Trace-Id
}

// Invoke sends one event and returns the function's response. A function
// error comes back as a *FunctionError.
func (e *Emulator) Invoke(ctx context.Context, event any) ([]byte, error) {
	return e.InvokeAs(ctx, Invocation{}, event)
}

// InvokeAs is Invoke, the invoke named by inv.
func (e *Emulator) InvokeAs(ctx context.Context, inv Invocation, event any) ([]byte, error) {
	payload, err := json.Marshal(event)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]string{"X-Amzn-RequestId": inv.RequestID, "X-Amzn-Trace-Id": inv.TraceID} {
		if v != "" {
			req.Header.Set(name, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke: status %d: %s", resp.StatusCode, body)
	}
	var fe FunctionError
	if json.Unmarshal(body, &fe) == nil && fe.Type != "" {
		return nil, &fe
	}
	return body, nil
}

// FunctionPID returns the process ID of the function (the emulator's child),
// which exists once the first invoke has initialised it. Linux only.
func (e *Emulator) FunctionPID() (int, error) {
	pid := strconv.Itoa(e.cmd.Process.Pid)
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return 0, err
	}
	for _, task := range tasks {
		children, err := os.ReadFile("/proc/" + pid + "/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(children)); len(fields) > 0 {
			return strconv.Atoi(fields[0])
		}
	}
	return 0, errors.New("the emulator has no function process yet")
}

// Stop ends the emulator and its function.
func (e *Emulator) Stop() {
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	<-e.done
}

// starting is held by the Start under way.
var starting sync.Mutex

// listening tells whether something accepts connections at addr.
func listening(addr string) bool {
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		conn.Close()
	}
	return err == nil
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
