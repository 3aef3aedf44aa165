package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
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

// throughputPlot is written by each throughput run, beside latest.md and,
// with -readme, beside README.md.
const throughputPlot = "throughput.svg"

// The latest run's section of README.md lies between these lines, and the
// cost group's tables between the next two.
const (
	latestBegin = "<!-- make bench writes from here: the latest run -->"
	latestEnd   = "<!-- make bench writes up to here -->"
	costBegin   = "<!-- make bench writes the cost tables from here -->"
	costEnd     = "<!-- make bench writes the cost tables up to here -->"
)

// results says where a run writes what it measured: always under dir
// (latest.md, cost.md, throughput.svg), and with readme into README.md's
// sections and throughput.svg here too, so that a plain run leaves the
// tracked files as they were.
type results struct {
	dir    string
	readme bool
}

// plots are the paths the throughput plot is drawn to.
func (r results) plots() []string {
	paths := []string{filepath.Join(r.dir, throughputPlot)}
	if r.readme {
		paths = append(paths, throughputPlot)
	}
	return paths
}

// write puts a section into file under dir and, with readme, between begin
// and end in README.md; body is given the directory it is written to.
func (r results) write(file, begin, end string, body func(dir string) string) error {
	if err := os.WriteFile(filepath.Join(r.dir, file), []byte(body(r.dir)), 0o644); err != nil {
		return err
	}
	if !r.readme {
		return nil
	}
	return replaceSection("README.md", begin, end, body("."))
}

// writeLatest writes this run's lines as the latest run, but for the cost
// group's, which have tables of their own; a run of the cost group alone
// leaves the latest run as it was.
func (r results) writeLatest() error {
	var lines [][2]string
	for _, l := range printed {
		if !strings.HasPrefix(l[0], "cost_") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	table := fmt.Sprintf("`make bench` of %s:\n\n", machine()) + latestTable(lines)
	return r.write("latest.md", latestBegin, latestEnd, func(dir string) string {
		if _, err := os.Stat(filepath.Join(dir, throughputPlot)); err != nil {
			return table
		}
		return table + fmt.Sprintf("\n![Invalidation throughput by batch size: the invalidator, the naive loop, the server's limit](%s)\n", throughputPlot)
	})
}

// latestTable puts lines three to a row, each value to the digits that
// tell: the README holds every line of a run in its budget of bytes.
func latestTable(lines [][2]string) string {
	const across = 3
	b := strings.Builder{}
	b.WriteString(strings.Repeat("| line | value ", across) + "|\n" + strings.Repeat("|---|---", across) + "|\n")
	for i, l := range lines {
		v, _ := strconv.ParseFloat(l[1], 64)
		digits := 3
		switch a := math.Abs(v); {
		case a >= 100:
			digits = 0
		case a >= 10:
			digits = 1
		}
		fmt.Fprintf(&b, "| `%s` | %s ", l[0], strconv.FormatFloat(v, 'f', digits, 64))
		if i%across == across-1 || i == len(lines)-1 {
			b.WriteString("|\n")
		}
	}
	return b.String()
}

// serverName is the cache server the run measured, "valkey 8.0.1".
var serverName string

// machine says when and on what this run ran.
func machine() string {
	m := fmt.Sprintf("%s on %s (%d CPUs), %s",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), cpuModel(), runtime.NumCPU(), runtime.Version())
	if serverName != "" { // none when only the decode group ran
		m += ", " + serverName
	}
	return m
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
