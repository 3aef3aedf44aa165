package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// printed is this run's lines, for bench/README.md.
var printed [][2]string

func print(name string, v float64) {
	value := strconv.FormatFloat(v, 'f', 3, 64)
	printed = append(printed, [2]string{name, value})
	fmt.Printf("BENCH %s %s\n", name, value)
}

// throughputPlot is written by each throughput run, beside README.md.
const throughputPlot = "throughput.svg"

// The latest run's section of README.md lies between these lines, and the
// cost group's tables between the next two.
const (
	latestBegin = "<!-- make bench writes from here: the latest run -->"
	latestEnd   = "<!-- make bench writes up to here -->"
	costBegin   = "<!-- make bench writes the cost tables from here -->"
	costEnd     = "<!-- make bench writes the cost tables up to here -->"
)

// writeReadme puts this run's lines into README.md's latest-run section,
// but for the cost group's, which have tables of their own; a run of the
// cost group alone leaves the section as it was.
func writeReadme(path string) error {
	var lines [][2]string
	for _, l := range printed {
		if !strings.HasPrefix(l[0], "cost_") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`make bench` of %s:\n\n| line | value |\n|---|---|\n", machine())
	for _, l := range lines {
		fmt.Fprintf(&b, "| `%s` | %s |\n", l[0], l[1])
	}
	if _, err := os.Stat(throughputPlot); err == nil {
		fmt.Fprintf(&b, "\n![Invalidation throughput by batch size: the invalidator, the naive loop, the server's limit](%s)\n", throughputPlot)
	}
	return replaceSection(path, latestBegin, latestEnd, b.String())
}

// machine says when and on what this run ran.
func machine() string {
	return fmt.Sprintf("%s on %s (%d CPUs), %s",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), cpuModel(), runtime.NumCPU(), runtime.Version())
}

// replaceSection puts body between the lines begin and end of the file at
// path.
func replaceSection(path, begin, end, body string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	head, rest, ok1 := bytes.Cut(old, []byte(begin))
	_, tail, ok2 := bytes.Cut(rest, []byte(end))
	if !ok1 || !ok2 {
		return fmt.Errorf("%s has no section %q … %q", path, begin, end)
	}
	section := begin + "\n\n" + body + "\n" + end
	out := slices.Concat(head, []byte(section), tail) // head and tail share old's array
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
