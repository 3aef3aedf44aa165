package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"
)

// costChanges is how many changes each cell counts, each with a key of its
// own.
const costChanges = 1000

// costRates are the rates, in changes per second, the paths are priced at.
var costRates = []float64{10, 100, 1000}

// costGroup counts what 1,000 changes use on every path, prints the counts
// and their price as BENCH lines, and writes the tables to out (cost.md,
// and README.md with -readme).
// When only is set, it names the one cell to run (sqs_b10_sd...), to try
// it out.
func costGroup(ctx context.Context, client valkey.Client, bin, only string, out results) {
	naive := build("helloconnect")
	defer os.RemoveAll(filepath.Dir(naive))
	s := newCostStack(ctx, client, bin, naive)
	defer s.close(ctx)
	start := time.Now()
	var uses []cellUse
	for _, c := range costCells {
		if only == "" || c.name() == only {
			at := time.Now()
			u := s.measure(ctx, c, costChanges)
			line := fmt.Sprintf("cost: %s: %.1f s, %.1f s of them counted", c.name(), time.Since(at).Seconds(), u.took.Seconds())
			if sends := u.function.add(u.poller); sends.Calls["SendMessage"] > 0 {
				line += fmt.Sprintf("; moto answered a second delete's send in %.1f ms", ms(sends.Took["SendMessage"])/float64(sends.Calls["SendMessage"]))
			}
			log.Print(line)
			uses = append(uses, u)
		}
	}
	took := time.Since(start)
	for _, u := range uses {
		f, name := u.figures(), "cost_"+u.name()+"_"
		if f.Changes != costChanges {
			log.Printf("cost: %s took %d changes for the %d sent (one came twice); its figures are per change taken", u.name(), f.Changes, costChanges)
		}
		print(name+"changes", float64(f.Changes))
		if u.path == "poller" {
			print(name+"cpu_ms", f.PollerCPUMs)
			print(name+"changes_per_task_per_s", changesPerTask(f))
		} else {
			print(name+"invokes", f.Invokes)
			print(name+"billed_ms", f.BilledMs)
			print(name+"cpu_ms", f.CPUMs)
		}
		print(name+"sqs_receives", f.Receives)
		print(name+"sqs_deletes", f.Deletes)
		print(name+"sqs_visibility", f.Visibility)
		print(name+"sqs_sends", f.Sends)
		print(name+"unlinks", f.Unlinks)
		print(name+"second_delete_keys", f.SecondDeleteKeys)
		for _, r := range costRates {
			print(name+"usd_per_million_at_"+strconv.Itoa(int(r)), cost(u.cell, f, r).total())
		}
	}
	for fn, u := range medianColdStarts(uses) {
		print("cost_coldstart_"+fn+"_ms", ms(u.cold))
		print("cost_coldstart_"+fn+"_cpu_ms", ms(u.coldCPU))
	}
	if only == "" {
		if err := out.write("cost.md", costBegin, costEnd, func(dir string) string { return costReport(uses, took, dir != ".") }); err != nil {
			log.Fatal(err)
		}
	}
}

// medianColdStarts returns, for each function the cells ran, the cell whose
// first function's cold start was the median of its cells'.
func medianColdStarts(uses []cellUse) map[string]cellUse {
	byFunction := map[string][]cellUse{}
	for _, u := range uses {
		if fn := functionOf(u.path); fn != "" {
			byFunction[fn] = append(byFunction[fn], u)
		}
	}
	median := map[string]cellUse{}
	for fn, us := range byFunction {
		slices.SortFunc(us, func(a, b cellUse) int { return int(a.cold - b.cold) })
		median[fn] = us[len(us)/2]
	}
	return median
}

// functionOf names the function that takes a path's first deletes.
func functionOf(path string) string {
	return map[string]string{"sqs": "sqs_invalidate", "stream": "stream_invalidate", "sns": "sns_invalidate", "naive": "helloconnect"}[path]
}
