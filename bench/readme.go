package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// throughputPlot is written by each throughput run, beside README.md.
const throughputPlot = "throughput.svg"

// The latest run's section of README.md lies between these lines.
const (
	latestBegin = "<!-- make bench writes from here: the latest run -->"
	latestEnd   = "<!-- make bench writes up to here -->"
)

// writeReadme puts this run's lines into README.md's latest-run section.
func writeReadme(path string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	head, rest, ok1 := bytes.Cut(old, []byte(latestBegin))
	_, tail, ok2 := bytes.Cut(rest, []byte(latestEnd))
	if !ok1 || !ok2 {
		return fmt.Errorf("%s has no latest-run section (%q … %q)", path, latestBegin, latestEnd)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n`make bench` of %s on %s (%d CPUs), %s:\n\n| line | value |\n|---|---|\n",
		latestBegin, time.Now().UTC().Format("2006-01-02 15:04 MST"), cpuModel(), runtime.NumCPU(), runtime.Version())
	for _, l := range printed {
		fmt.Fprintf(&b, "| `%s` | %s |\n", l[0], l[1])
	}
	if _, err := os.Stat(throughputPlot); err == nil {
		fmt.Fprintf(&b, "\n![Invalidation throughput by batch size: the invalidator, the naive loop, the server's limit](%s)\n", throughputPlot)
	}
	b.WriteString("\n" + latestEnd)
	out := slices.Concat(head, []byte(b.String()), tail) // head and tail share old's array
	return os.WriteFile(path, out, 0o644)
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return runtime.GOARCH
}
