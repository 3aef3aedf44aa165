package main

import (
	"context"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// pollerCell runs the poller, a process of its own as on Fargate, on the
// queue (and, as deployed, on the delay queue, which it consumes even with
// second deletes off), feeds it n changes and counts what it used: its
// SQS requests, its CPU time while it worked, its log lines.
func (s *costStack) pollerCell(ctx context.Context, c cell, n int) cellUse {
	requests := s.counted()
	defer requests.Close()
	logs := &logMeter{}
	health := freeAddr()
	cmd := exec.Command(s.bin + "/poller/poller")
	cmd.Env = append(append(os.Environ(), s.functionEnv(requests, c.second)...),
		"QUEUE_URL="+s.queue, "HEALTH_ADDR="+health, "POLLER_MAX_MESSAGES="+strconv.Itoa(c.batch))
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Fatalf("cost: start the poller: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitHealthy(health)
	time.Sleep(300 * time.Millisecond) // its connection to the cache, made in the background
	logs.reset()
	requests.reset()
	cpu, before, start := threadsCPU(cmd.Process.Pid), s.unlinks(ctx), time.Now()
	deleted := func() int { return requests.counts().Messages["DeleteMessageBatch"] }
	s.feed(ctx, n, 4*c.batch, requests) // for its two receivers, and as many more
	waitFor(c.name()+"'s deletes", 2*time.Minute, func() bool {
		b, _, _ := logs.sums()
		return deleted() >= n+requests.counts().Sent[s.again] && (!c.second || b.SecondDeleteKey >= n && b.FailoverKey >= n)
	})
	u := cellUse{cell: c, took: time.Since(start), poller: requests.counts()}
	u.pollerCPU = threadsCPU(cmd.Process.Pid) - cpu
	u.batches, u.logBytes, _ = logs.sums()
	u.unlinks = s.unlinks(ctx) - before
	return u
}

// waitHealthy waits for the poller's health endpoint at addr to answer.
func waitHealthy(addr string) {
	waitFor("the poller's health endpoint", 10*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
