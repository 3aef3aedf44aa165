package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"
)

// liveSamples is how many samples of the other nodes' keys a fault that
// stops one must give, for their stale share to be judged (limits).
const liveSamples = 3000

// backlog is how long after the fault's end the last change written
// during it was invalidated on path; 0 when none was.
func (r results) backlog(f faultResult, path string) time.Duration {
	var last time.Duration
	for i, at := range r.lagAt[path] {
		if !at.Before(f.from) && at.Before(f.to) {
			last = max(last, at.Add(r.lag[path][i]).Sub(f.to))
		}
	}
	return last
}

// printBacklogs prints each fault's backlog on each path, and the stale
// share of the samples of the nodes that stayed up; it returns the
// backlogs to judge and, of the fault whose share is judged, its share. The
// driver killed outright leaves its invoke's messages hidden for the
// queue's visibility timeout, as a crashed function does in AWS: its
// backlog is reported, not judged. Too few samples count as all stale.
func (r results) printBacklogs(faults []faultResult, line func(string, any)) (backlogs map[string]time.Duration, live map[string]float64) {
	backlogs, live = map[string]time.Duration{}, map[string]float64{}
	for _, f := range faults {
		for _, path := range paths {
			name := "backlog_ms_" + f.name + "_" + pathName(path)
			b := r.backlog(f, path)
			line(name, b.Milliseconds())
			if f.name != "driver-killed-restarted" {
				backlogs[name] = b
			}
		}
		if f.samples == 0 {
			continue
		}
		share := float64(f.staleLive) / float64(f.samples)
		line("stale_1s_live_"+f.name, fmt.Sprintf("%.4f", share))
		line("samples_1s_live_"+f.name, f.samples)
		line("late_ms_1s_live_"+f.name, f.lateLive.Milliseconds())
		if f.name == "node-killed-restarted-empty" {
			if f.samples < liveSamples {
				share = 1
			}
			live["stale_1s_live_"+f.name] = share
		}
	}
	return backlogs, live
}

var maxReceivesField = regexp.MustCompile(`"max_receives":(\d+)`)

// maxReceives reads the most receives a message handed back had had, in the
// worker's log at path: how near the DLQ an outage brought it.
func maxReceives(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	most := 0
	for _, m := range maxReceivesField.FindAllSubmatch(data, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		most = max(most, n)
	}
	return most, nil
}
