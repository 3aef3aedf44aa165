package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTimes are the CPU seconds the stack's processes used so far, by part:
// what tells a lag the worker caused from one the rig on the same cores
// caused (moto answering every writer, reader and receive; the cache nodes;
// this run's own writers and readers).
type cpuTimes map[string]time.Duration

// cpuParts are the parts, in the order they are printed.
var cpuParts = []string{"moto", "cache", "poller", "functions", "e2e"}

func (s *stack) cpu() cpuTimes {
	c := cpuTimes{}
	run := filepath.Join(s.env.state, "run")
	motos, _ := filepath.Glob(filepath.Join(run, "moto*.pid"))
	for _, f := range motos {
		if pid, err := pidFile(f); err == nil {
			c["moto"] += cpuOf(pid)
		}
	}
	nodes, _ := filepath.Glob(filepath.Join(run, "cache-*.pid"))
	for _, f := range nodes {
		if pid, err := pidFile(f); err == nil {
			c["cache"] += cpuOf(pid)
		}
	}
	c["poller"] = cpuOf(s.poller.cmd.Process.Pid)
	// The driver, its emulators and their functions.
	var tree func(pid int)
	tree = func(pid int) {
		c["functions"] += cpuOf(pid)
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
		for _, t := range tasks {
			data, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(data)) {
				if child, err := strconv.Atoi(f); err == nil {
					tree(child)
				}
			}
		}
	}
	tree(s.driver.cmd.Process.Pid)
	c["e2e"] = cpuOf(os.Getpid())
	return c
}

// since prints each part's share of a core between then and now, in
// percent.
func (c cpuTimes) since(then cpuTimes, wall time.Duration) string {
	var b strings.Builder
	for _, p := range cpuParts {
		fmt.Fprintf(&b, " %s %.0f", p, 100*(c[p]-then[p]).Seconds()/wall.Seconds())
	}
	return strings.TrimSpace(b.String())
}

func pidFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// cpuOf reads a process's user and system time from /proc (clock ticks of
// 100 a second, as on every Linux the stack runs on); 0 when it is gone.
func cpuOf(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command, which may hold spaces, in parentheses.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
