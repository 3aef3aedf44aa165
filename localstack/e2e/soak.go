package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// soakPlan is make soak: a steady load for steady at rate changes a second
// of each kind, then, for ramp each, rates doubling until lag p99 passes
// the goal's soakLag on a path, to find the highest steady rate.
type soakPlan struct {
	steady, ramp time.Duration
	rate         float64
	judgeGrowth  bool // only a long soak tells growth from warming up
}

// processStats is a process's footprint, from /proc.
type processStats struct {
	rss, fds int64
}

func readStats(pid int) (processStats, error) {
	var s processStats
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			s.rss = kb << 10
		}
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	s.fds = int64(len(fds))
	return s, err
}

// functions are the driver's function processes (the emulators' children).
func functions(driver int) []int {
	var pids []int
	var walk func(pid int, depth int)
	walk = func(pid int, depth int) {
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
		for _, t := range tasks {
			data, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(data)) {
				child, _ := strconv.Atoi(f)
				if depth == 1 {
					pids = append(pids, child)
				} else {
					walk(child, depth+1)
				}
			}
		}
	}
	walk(driver, 0)
	return pids
}

// sample is one look at the worker's processes.
type sample struct {
	at                time.Time
	poller, functions processStats
	pollerGoroutines  int64
}

func (s *stack) sample(since int64) (sample, error) {
	x := sample{at: time.Now()}
	var err error
	if x.poller, err = readStats(s.poller.cmd.Process.Pid); err != nil {
		return x, err
	}
	for _, pid := range functions(s.driver.cmd.Process.Pid) {
		if f, err := readStats(pid); err == nil {
			x.functions.rss += f.rss
			x.functions.fds += f.fds
		}
	}
	x.pollerGoroutines, err = lastGoroutines(s.poller.log, since)
	return x, err
}

// lastGoroutines reads the poller's last runtime line, written after the
// log was since bytes long.
func lastGoroutines(path string, since int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(since, 0); err != nil {
		return 0, err
	}
	var n int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"msg":"runtime"`) {
			var line struct{ Goroutines int64 }
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				n = line.Goroutines
			}
		}
	}
	return n, sc.Err()
}

// soakWarmup is left out of the steady lag: the emulators' first invokes
// and the poller's first receives, which the 45 s soak of CI would weigh.
const soakWarmup = 10 * time.Second

// runSoak runs the soak and its ramp, prints SOAK lines and tells whether
// it passed: nothing lost, lag p99 under a second at the steady rate, and
// in a long soak neither RSS nor goroutines grown by more than 10 % after
// its first minute.
func runSoak(ctx context.Context, e env, s *stack, p soakPlan, lim limits) (bool, error) {
	line := func(name string, v any) { fmt.Printf("SOAK %s %v\n", name, v) }
	start := time.Now()
	since := s.logSizes()[s.poller.log]
	l, err := newLoad(ctx, e, "soak-", false)
	if err != nil {
		return false, err
	}
	l.rate = p.rate
	progress := startProgress(start, l)
	defer progress.stop()
	progress.phase(fmt.Sprintf("soak at %g changes/s of each kind", p.rate))
	l.start(ctx)
	cpuFrom, cpuAt := s.cpu(), time.Now()
	var samples []sample
	for end := time.Now().Add(p.steady); time.Now().Before(end) && ctx.Err() == nil; wait.For(ctx, 10*time.Second) {
		x, err := s.sample(since)
		if err != nil {
			return false, err
		}
		samples = append(samples, x)
		fmt.Printf("soak %4.0fs poller rss %.1f MiB, %d goroutines, %d fds; functions rss %.1f MiB, %d fds\n",
			time.Since(start).Seconds(), float64(x.poller.rss)/(1<<20), x.pollerGoroutines, x.poller.fds, float64(x.functions.rss)/(1<<20), x.functions.fds)
	}
	steadyEnd := time.Now()
	line("cpu_pct", s.cpu().since(cpuFrom, steadyEnd.Sub(cpuAt)))
	steps := []float64{}
	for rate := p.rate * 2; p.ramp > 0 && ctx.Err() == nil && rate <= 640; rate *= 2 {
		progress.phase(fmt.Sprintf("ramp at %g changes/s of each kind", rate))
		l.stopWriters()
		l.rate = rate
		l.writeCtx, l.stopW = context.WithCancel(ctx)
		l.startWriters()
		wait.For(ctx, p.ramp)
		steps = append(steps, rate)
	}
	progress.phase("soak, draining")
	l.stopWriters()
	drain, drained := l.drain(ctx, 3*time.Minute)
	l.stopReaders()
	progress.stop()
	r, err := l.check(ctx, s.logs())
	if err != nil {
		return false, err
	}
	lost := 0
	for _, n := range r.lost {
		lost += n
	}
	line("duration_s", int(time.Since(start).Seconds()))
	line("rate_per_kind", p.rate)
	line("changes", r.changes)
	line("changes_per_s", fmt.Sprintf("%.1f", float64(r.changes)/time.Since(start).Seconds()))
	line("lost", lost)
	line("drained", drained)
	line("drain_s", int(drain.Seconds()))
	var g gates
	g.check("changes lost", lost, "= 0", lost == 0)
	g.check("drained", drained, "true", drained)
	p99s := map[string]time.Duration{}
	window := func(from, to time.Time, path string) []int {
		var in []int
		for i, at := range r.lagAt[path] {
			if !at.Before(from) && at.Before(to) {
				in = append(in, i)
			}
		}
		return in
	}
	lags := func(path string, idx []int) []time.Duration {
		ds := make([]time.Duration, len(idx))
		for j, i := range idx {
			ds[j] = r.lag[path][i]
		}
		return ds
	}
	for _, path := range paths {
		name := pathName(path)
		steady := window(start.Add(soakWarmup), steadyEnd, path)
		line("lag_p50_ms_"+name, percentile(lags(path, steady), 0.5).Milliseconds())
		line("lag_p99_ms_"+name, percentile(lags(path, steady), 0.99).Milliseconds())
		p99s["lag_p99_ms_"+name] = percentile(lags(path, steady), 0.99)
		for k, stage := range stageNames {
			ds := make([]time.Duration, len(steady))
			for j, i := range steady {
				ds[j] = r.stages[path][i][k]
			}
			line(fmt.Sprintf("stage_%s_ms_%s", stage, name), fmt.Sprintf("%d %d", percentile(ds, 0.5).Milliseconds(), percentile(ds, 0.99).Milliseconds()))
		}
	}
	if len(samples) > 0 {
		first, last := samples[0], samples[len(samples)-1]
		for _, x := range samples {
			if x.at.Sub(start) >= time.Minute {
				first = x
				break
			}
		}
		line("poller_rss_mib", fmt.Sprintf("%.1f %.1f", float64(first.poller.rss)/(1<<20), float64(last.poller.rss)/(1<<20)))
		line("poller_goroutines", fmt.Sprintf("%d %d", first.pollerGoroutines, last.pollerGoroutines))
		line("poller_fds", fmt.Sprintf("%d %d", first.poller.fds, last.poller.fds))
		line("functions_rss_mib", fmt.Sprintf("%.1f %.1f", float64(first.functions.rss)/(1<<20), float64(last.functions.rss)/(1<<20)))
		line("functions_fds", fmt.Sprintf("%d %d", first.functions.fds, last.functions.fds))
		grew := func(a, b int64) bool { return a > 0 && float64(b) > 1.1*float64(a) }
		if p.judgeGrowth {
			grown := grew(first.poller.rss, last.poller.rss) || grew(first.functions.rss, last.functions.rss) || grew(first.pollerGoroutines, last.pollerGoroutines)
			g.check("RSS or goroutines grown by over 10 % after the first minute", grown, "false", !grown)
		}
	}
	// The highest rate whose every path kept lag p99 under soakLag.
	best := p.rate
	for i, rate := range steps {
		from := steadyEnd.Add(time.Duration(i) * p.ramp)
		under := true
		for _, path := range paths {
			p99 := percentile(lags(path, window(from, from.Add(p.ramp), path)), 0.99)
			line(fmt.Sprintf("ramp_%g_lag_p99_ms_%s", rate, pathName(path)), p99.Milliseconds())
			under = under && p99 <= goals.soakLag
		}
		if !under {
			break
		}
		best = rate
	}
	line("max_steady_rate_per_kind", best)
	g.worst("steady lag p99, the worst path", p99s, lim.soakLag)
	ok := g.print("SOAK", lim)
	line("result", map[bool]string{true: "PASS", false: "FAIL"}[ok])
	return ok, nil
}
