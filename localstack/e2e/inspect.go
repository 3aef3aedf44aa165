package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// inspector is invalidator inspect beside the run, as a team would run it:
// a second consumer of the table's stream and of the topic (through the
// inspect queue), checking every change's keys 1 s and 10 s after.
type inspector struct {
	name   string // of its figures: inspect, or inspect_local through a local tier
	cmd    *exec.Cmd
	stdout bytes.Buffer
	done   chan error
	saveTo string // the whole report, with the inconsistent keys
}

// inspection is the part of the inspector's JSON report the run prints.
type inspection struct {
	Changes int `json:"changes"`
	Delays  []struct {
		After        string   `json:"after"`
		Keys         int      `json:"keys"`
		Inconsistent int      `json:"inconsistent"`
		Unverified   int      `json:"unverified"`
		Unreadable   int      `json:"unreadable"`
		Absent       int      `json:"absent"`
		Late         int      `json:"late"`
		Tags         int      `json:"tags"`
		Nines        *float64 `json:"nines"` // null when no key was compared
		NinesAtLeast bool     `json:"ninesAtLeast"`
	} `json:"delays"`
}

func startInspector(e env, bin, name string, flags ...string) (*inspector, error) {
	log, err := os.Create(filepath.Join(e.state, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	in := &inspector{name: name, done: make(chan error, 1), saveTo: filepath.Join(e.state, name+".json")}
	// The readers' naive values are JSON items with their Version.
	in.cmd = exec.Command(filepath.Join(bin, "invalidator"), append([]string{"inspect", "--table", e.table, "--queue", e.inspectQueue,
		"--at", "1s,10s", "--version-path", "Version", "--json"}, flags...)...)
	in.cmd.Env = append(os.Environ(), "INVALIDATION_RULES="+strings.ReplaceAll(rules, "TABLE", e.table))
	in.cmd.Stdout, in.cmd.Stderr = &in.stdout, log
	if err := in.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start the inspector: %w", err)
	}
	go func() { in.done <- in.cmd.Wait(); log.Close() }()
	return in, nil
}

// stopReading lets the inspector finish the checks of what it read.
func (in *inspector) stopReading() { _ = in.cmd.Process.Signal(syscall.SIGINT) }

// report waits for the inspector's report.
func (in *inspector) report() (inspection, error) {
	var r inspection
	select {
	case err := <-in.done:
		if err != nil {
			return r, fmt.Errorf("the inspector: %w", err)
		}
	case <-time.After(time.Minute):
		_ = in.cmd.Process.Kill()
		return r, fmt.Errorf("the inspector did not finish its checks within a minute")
	}
	err := json.Unmarshal(in.stdout.Bytes(), &r)
	return r, errors.Join(err, os.WriteFile(in.saveTo, in.stdout.Bytes(), 0o644))
}

func (r inspection) print(name string) {
	fmt.Printf("E2E %s_changes %d\n", name, r.Changes)
	for _, d := range r.Delays {
		nines := "n/a"
		if d.Nines != nil {
			nines = fmt.Sprintf("%.2f", *d.Nines)
		}
		if d.NinesAtLeast {
			nines = ">=" + nines
		}
		for _, l := range []struct {
			name  string
			value any
		}{{"keys", d.Keys}, {"inconsistent", d.Inconsistent}, {"unverified", d.Unverified}, {"unreadable", d.Unreadable}, {"absent", d.Absent}, {"late", d.Late}, {"tags", d.Tags}, {"nines", nines}} {
			fmt.Printf("E2E %s_%s_%s %v\n", name, l.name, d.After, l.value)
		}
	}
}
