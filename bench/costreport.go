package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// costReport is the cost group's section of README.md: the dollars per
// million changes of each cell at each rate, and the cold starts; with
// counts, for cost.md, what 1,000 changes used, which README.md leaves out
// for its budget of bytes.
func costReport(uses []cellUse, took time.Duration, counts bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`make bench` of %s: %d cells of %d changes, one key each, in %.0f s. Prices: us-east-1 list prices "+
		"(below). First deletes in full batches: the queue or the stream always held one when the mapping or the poller read; "+
		"the delay queue's consumers took what had come.\n\n", machine(), len(uses), costChanges, took.Seconds())

	b.WriteString("**Dollars per million changes**, by rate in changes/s; in brackets the Lambda duration's part, low–high " +
		"(the model's bounds). Not included: publishing the changes (SNS, $0.50 per million publishes, $0.05 with " +
		"`PublishBatch` of 10, on every path but the stream's), fixed costs (VPC endpoints).\n\n")
	b.WriteString("*Deleting again*: off, or on as deployed — the second delete, the failover schedule (each key once more, " +
		"through the delay queue) and the failover window (a message per batch).\n\n")
	b.WriteString("| path | batch | deleting again | 10/s | 100/s | 1,000/s | Lambda duration | poller tasks |\n|---|---|---|---|---|---|---|---|\n")
	for _, u := range uses {
		f := u.figures()
		fmt.Fprintf(&b, "| %s | %s | %s |", pathLabel(u.path), batchLabel(u.cell), onOff(u.second))
		var tasks []string
		for _, r := range costRates {
			d := cost(u.cell, f, r)
			fmt.Fprintf(&b, " %s |", usd(d.total()))
			tasks = append(tasks, fmt.Sprint(d.Tasks))
		}
		d := cost(u.cell, f, costRates[0])
		if u.path == "poller" {
			fmt.Fprintf(&b, " – | %s |\n", strings.Join(tasks, " / "))
		} else {
			fmt.Fprintf(&b, " %s (%s–%s) | – |\n", usd(d.Duration), usd(d.DurationLow), usd(d.DurationHigh))
		}
	}

	b.WriteString("\n**By item, at 100 changes/s**: Lambda requests, Lambda duration, SQS requests (Lambda's pollers' and " +
		"the functions' or the poller's, and the idle receives modelled), Fargate, ECPUs of the cache, log ingestion.\n\n")
	b.WriteString("| path | batch | deleting again | requests | duration | SQS | Fargate | cache | logs | total |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, u := range uses {
		d := cost(u.cell, u.figures(), 100)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", pathLabel(u.path), batchLabel(u.cell), onOff(u.second),
			usd(d.Requests), usd(d.Duration), usd(d.SQS), usd(d.Fargate), usd(d.Cache), usd(d.Logs), usd(d.total()))
	}

	if counts {
		usedTable(&b, uses)
	} else {
		b.WriteString("\nWhat 1,000 changes used, as counted, is in `.local/bench/cost.md`.\n")
	}

	b.WriteString("\n**The poller's tasks** (0.25 vCPU, 0.5 GB, arm64, at most 70 % busy) at the CPU time per change " +
		"measured here:\n\n| cell | CPU ms per 1,000 changes | changes/s a task sustains |\n|---|---|---|\n")
	for _, u := range uses {
		if u.path == "poller" {
			f := u.figures()
			fmt.Fprintf(&b, "| `%s` | %.0f | %.0f |\n", u.name(), f.PollerCPUMs, changesPerTask(f))
		}
	}

	b.WriteString("\n**Cold starts** (Lambda bills init since 1 August 2025): the first invoke from outside, its CPU " +
		"time, and its price by the same model, against the duration of a warm invoke of a batch of 10 (of 1 for the SNS " +
		"and the naive function).\n\n| function | first invoke ms | CPU ms | $ per million cold starts | warm invokes it equals |\n|---|---|---|---|---|\n")
	cold := medianColdStarts(uses)
	for _, fn := range slices.Sorted(maps.Keys(cold)) {
		u := cold[fn]
		warm := warmInvokeUSD(uses, u.path)
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %s | %.0f |\n", strings.ReplaceAll(fn, "_", "-"), ms(u.cold), ms(u.coldCPU), usd(coldStartUSD(u)*1e6), coldStartUSD(u)/warm)
	}
	return b.String()
}

// usedTable writes what 1,000 changes of each cell used, as counted.
func usedTable(b *strings.Builder, uses []cellUse) {
	b.WriteString("\n**What 1,000 changes used**, as counted, per 1,000 of the changes the cell took (SQS requests of every client; receives that brought " +
		"messages, with how many each brought on average; the empty receives of the local run are left out and " +
		"modelled instead). Billed ms: the model at 256 MB arm64; CPU ms: the functions' or the poller's.\n\n")
	b.WriteString("| cell | changes taken | invokes (deleting again) | ms as run | billed ms | CPU ms | receives (msgs each) | deletes | visibility | sends | stream reads | UNLINKs | keys deleted again | log KiB |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, u := range uses {
		f := u.figures()
		fmt.Fprintf(b, "| `%s` | %d | %.0f (%.0f) | %.0f | %.0f | %.0f | %.0f (%.1f) | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
			u.name(), f.Changes, f.Invokes, f.SecondInvokes, f.DurationMs, f.BilledMs, f.CPUMs+f.PollerCPUMs, f.Receives, f.MessagesPerReceive,
			f.Deletes, f.Visibility, f.Sends, f.StreamReads, f.Unlinks, f.SecondDeleteKeys, f.LogBytes/1024)
	}
}

// warmInvokeUSD is the Lambda duration of one invoke of path's function at
// batch 10 (1 for the SNS function and the naive one), second deletes off.
func warmInvokeUSD(uses []cellUse, path string) float64 {
	for _, u := range uses {
		if u.path == path && !u.second && (u.batch == 10 || path == "sns" || path == "naive") {
			f := u.figures()
			return cost(u.cell, f, 100).Duration / (f.Invokes * 1000)
		}
	}
	return 0
}

func pathLabel(p string) string {
	return map[string]string{"sqs": "SQS function", "stream": "stream function", "sns": "SNS function",
		"poller": "poller on Fargate", "naive": "naive: one invoke, one DEL per event"}[p]
}

func batchLabel(c cell) string {
	switch c.path {
	case "sns":
		return "1 (always)"
	case "poller":
		return fmt.Sprintf("%d per receive", c.batch)
	}
	return fmt.Sprint(c.batch)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func usd(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.001:
		return fmt.Sprintf("$%.5f", v)
	}
	return fmt.Sprintf("$%.3f", v)
}
