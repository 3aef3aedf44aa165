package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// processCPU returns the user and system CPU time a process has used, all
// its threads together, from /proc/<pid>/stat: in clock ticks of 10 ms, so
// fit for totals over many requests.
func processCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// utime and stime are fields 14 and 15; the command before them, in
	// parentheses, may hold spaces.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// threadsCPU returns the time a process's live threads have run, from each
// one's /proc/<pid>/task/<tid>/schedstat, in nanoseconds: precise enough to
// tell one invoke's CPU time. A thread that exited is no longer counted;
// Go's runtime keeps its threads.
func threadsCPU(pid int) time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/schedstat")
		if err != nil {
			continue
		}
		run, _, _ := strings.Cut(string(b), " ")
		ns, _ := strconv.ParseInt(run, 10, 64)
		total += time.Duration(ns)
	}
	return total
}
