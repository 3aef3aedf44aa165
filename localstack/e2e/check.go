package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/writethrough"
)

// faultResult is a fault, when it lasted, and the probes sent at its end.
type faultResult struct {
	name     string
	quiet    time.Time // the steady time before it began then
	from, to time.Time
	probes   []probeResult
	// Of the writethrough keys on the nodes that stayed up, sampled a
	// second after their change while the fault stopped one node: how many,
	// how many were stale, and the most time one of those took to be fresh.
	samples, staleLive int64
	lateLive           time.Duration
}

// staleCounts are the values found older than their source, by reader.
type staleCounts struct {
	writethrough, naive, replica, list int
	notes                              []string
}

// race is a run without faults, its second delete off (delay 0) or on.
type race struct {
	delay   time.Duration
	drained bool
	drain   time.Duration // how long its drain took
	stale   staleCounts
}

// results is what a run counts once drained.
type results struct {
	changes, poisonSent, reads, readErrors int64
	stale                                  staleCounts
	races                                  []race
	failovers                              []failoverResult
	validParked, poisonUnparked            int
	lost                                   map[string]int
	maxReceives                            map[string]int // by path: the most receives of a message handed back
	lag                                    map[string][]time.Duration
	lagAt                                  map[string][]time.Time       // when each lag's change was written
	stages                                 map[string][][]time.Duration // each lag's stages, in stageNames' order
	wtReads                                *wtReads
	near                                   *nearCounts // the readers through local tiers; nil: none
	big                                    *bigRecord  // the budget-exceeded fault's; nil: none
	fleet                                  []fleetRun
	notes                                  []string
}

// invalidated is, for each marker key, what each function's earliest
// debug "record invalidated" line for it tells.
type invalidated map[string]map[string]timeline

func parseLogs(paths []string) (invalidated, error) {
	seen := invalidated{}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"msg":"record invalidated"`) {
				continue
			}
			var line logLine
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			for _, k := range line.Keys {
				if !strings.HasPrefix(k, "e2e:mark:") {
					continue
				}
				if seen[k] == nil {
					seen[k] = map[string]timeline{}
				}
				if t, ok := seen[k][line.Function]; !ok || line.Time.Before(t.logged) {
					seen[k][line.Function] = line.timeline()
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

func (l *load) check(ctx context.Context, logs []string) (results, error) {
	r := results{lost: map[string]int{}, lag: map[string][]time.Duration{}, lagAt: map[string][]time.Time{}, stages: map[string][][]time.Duration{},
		reads: l.reads.Load(), readErrors: l.readErrors.Load(), wtReads: &l.wt, big: l.big}
	seen, err := parseLogs(logs)
	if err != nil {
		return r, err
	}
	l.mu.Lock()
	changes, poisons := slices.Clone(l.changes), slices.Clone(l.poisons)
	l.mu.Unlock()
	r.changes, r.poisonSent = int64(len(changes)), int64(len(poisons))
	for _, c := range changes {
		for _, path := range c.paths {
			t, ok := seen[c.marker][path]
			if !ok {
				r.lost[path]++
				if r.lost[path] <= 3 {
					r.notes = append(r.notes, "lost on "+path+": "+c.marker)
				}
				continue
			}
			lag, stages := split(c, t)
			r.lag[path] = append(r.lag[path], lag)
			r.lagAt[path] = append(r.lagAt[path], c.at)
			r.stages[path] = append(r.stages[path], stages)
		}
	}
	if r.stale, err = l.stale(ctx); err != nil {
		return r, err
	}
	if l.near != nil {
		c := l.near.check(l)
		r.near = &c
		r.notes = append(r.notes, c.notes...)
	}
	r.notes = append(r.notes, r.stale.notes...)
	r.maxReceives = map[string]int{}
	for path, log := range map[string]string{pathPoller: logs[0], pathSQS: logs[1]} { // stack.logs' order
		if r.maxReceives[path], err = maxReceives(log); err != nil {
			return r, err
		}
	}
	return r, l.parked(ctx, &r, poisons)
}

// stale compares every cached entry of the load's entities with its source.
func (l *load) stale(ctx context.Context) (r staleCounts, err error) {
	if err := l.cache.Do(ctx, l.cache.B().Ping().Build()).Error(); err != nil {
		return r, fmt.Errorf("the cache does not answer the check: %w", err)
	}
	errAbsent := errors.New("absent")
	absent := func(context.Context) (item, error) { return item{}, errAbsent }
	// Never refreshed early nor renewed: the check only looks.
	look := writethrough.New[item](l.cache, writethrough.Options[item]{TTL: time.Hour, Beta: -1})
	// A lease left, or a value that no longer decodes, is no stale value:
	// Get then asks the loader.
	writethroughStale := func(key string, source item) (bool, error) {
		n, err := l.cache.Do(ctx, l.cache.B().Exists().Key(key).Build()).AsInt64()
		if err != nil || n == 0 {
			return false, err
		}
		v, err := look.Get(ctx, key, absent)
		return err == nil && v.Version < source.Version, nil
	}
	for i := range entities {
		for _, entity := range []string{"product", "user", "order"} {
			id := l.id(entity, i)
			var source item
			if entity == "product" {
				source, err = l.sourceProduct(ctx, id)
			} else {
				source = l.sourceRecorded(entity, id)
			}
			if err != nil {
				return r, err
			}
			for _, c := range []struct {
				key   string
				count *int
			}{{"cache:" + entity + ":" + id, &r.writethrough}, {"replica:" + entity + ":" + id, &r.replica}} {
				stale, err := writethroughStale(c.key, source)
				if err != nil {
					return r, err
				}
				if stale {
					*c.count++
					r.notes = append(r.notes, fmt.Sprintf("stale %s: the source has version %d", c.key, source.Version))
				}
			}
			raw, err := l.cache.Do(ctx, l.cache.B().Get().Key("naive:"+entity+":"+id).Build()).AsBytes()
			if valkey.IsValkeyNil(err) {
				continue
			}
			var v item
			if err != nil || json.Unmarshal(raw, &v) != nil {
				return r, fmt.Errorf("naive key of %s %s: %v", entity, id, err)
			}
			if v.Version < source.Version {
				r.naive++
			}
		}
	}
	return r, l.staleLists(ctx, &r)
}

var poisonMarker = regexp.MustCompile(`e2e-poison-\d+`)

// parked reads the failure queue and the DLQ: every poison message must be
// parked by each function on its way, and nothing else may be there.
func (l *load) parked(ctx context.Context, r *results, poisons []poisoned) error {
	found := map[string]bool{} // marker + " " + function
	for _, q := range []string{l.env.failureQueue, l.env.dlq} {
		for {
			out, err := l.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10,
				WaitTimeSeconds: 1, VisibilityTimeout: 600, MessageAttributeNames: []string{"All"}})
			if err != nil {
				return err
			}
			if len(out.Messages) == 0 {
				break
			}
			for _, m := range out.Messages {
				body := aws.ToString(m.Body)
				p, ok, _ := failurequeue.Parse(body, queues.Strings(m.MessageAttributes))
				if marker := poisonMarker.Find(p.Data); ok && marker != nil {
					found[string(marker)+" "+p.Function] = true
					continue
				}
				if r.big != nil && ok && q == l.env.failureQueue && bytes.Contains(p.Data, []byte(`"id":"e2e-big-`)) {
					r.big.found++ // by its reason, parked for its cost
					if strings.Contains(p.Reason, "ECPUs a second gives") {
						r.big.reasoned++
					}
					continue
				}
				r.validParked++
				if r.validParked <= 3 {
					r.notes = append(r.notes, "valid change parked or dead-lettered in "+q+": "+truncate(body))
				}
			}
		}
	}
	for _, p := range poisons {
		for _, path := range p.paths {
			if !found[p.marker+" "+path] {
				r.poisonUnparked++
				r.notes = append(r.notes, "poison not parked by "+path+": "+p.marker)
			}
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// print writes the E2E lines, then the summary of its gates, and tells
// whether the run passed: correctness always, timings against lim.
func (r results) print(faults []faultResult, drained bool, drain, took time.Duration, lim limits) bool {
	line := func(name string, v any) { fmt.Printf("E2E %s %v\n", name, v) }
	var g gates
	lost := 0
	for _, n := range r.lost {
		lost += n
	}
	line("duration_s", int(took.Seconds()))
	line("changes", r.changes)
	line("reads", r.reads)
	line("read_errors", r.readErrors)
	line("stale_writethrough", r.stale.writethrough)
	line("stale_naive", r.stale.naive)
	line("stale_replica", r.stale.replica)
	line("stale_list", r.stale.list)
	line("valid_parked", r.validParked)
	line("lost", lost)
	line("poison_sent", r.poisonSent)
	line("poison_unparked", r.poisonUnparked)
	for _, path := range paths {
		name := pathName(path)
		line("lost_"+name, r.lost[path])
		line("lag_p50_ms_"+name, percentile(r.lag[path], 0.5).Milliseconds())
		line("lag_p99_ms_"+name, percentile(r.lag[path], 0.99).Milliseconds())
		if path == pathPoller || path == pathSQS {
			line("max_receives_"+name, r.maxReceives[path])
		}
	}
	recoveries, longOutage, unrecovered := map[string]time.Duration{}, map[string]time.Duration{}, []string{}
	for _, f := range faults {
		for _, p := range f.probes {
			name := "recovery_ms_" + f.name + "_" + pathName(p.path)
			line(name, p.took.Milliseconds())
			switch {
			case p.err != nil:
				unrecovered = append(unrecovered, name)
				r.notes = append(r.notes, fmt.Sprintf("%s: %v after %v", name, p.err, p.took.Round(time.Millisecond)))
			case f.name == "cache-down":
				longOutage[name] = p.took
			default:
				recoveries[name] = p.took
			}
		}
	}
	readsOK := r.wtReads.report(line, faults)
	nearOK := r.near == nil || r.near.print(line)
	backlogs, live := r.printBacklogs(faults, line)
	line("drained", drained)
	line("drain_s", int(drain.Seconds()))
	// The races side by side: what the second delete prevents.
	racesStale, racesDrained := 0, true
	for _, race := range r.races {
		name := "race_second_delete_" + race.delay.String()
		if race.delay == 0 {
			name = "race_second_delete_off"
		}
		line(name+"_stale_writethrough", race.stale.writethrough)
		line(name+"_stale_naive", race.stale.naive)
		line(name+"_stale_replica", race.stale.replica)
		line(name+"_stale_list", race.stale.list)
		line(name+"_drained", race.drained)
		line(name+"_drain_s", int(race.drain.Seconds()))
		if race.delay > 0 {
			racesStale += race.stale.writethrough + race.stale.naive + race.stale.replica + race.stale.list
			racesDrained = racesDrained && race.drained
			r.notes = append(r.notes, race.stale.notes...)
		}
	}
	printFailovers(r.failovers, line, &g, lim)
	stale := r.stale.writethrough + r.stale.naive + r.stale.replica + r.stale.list
	g.check("stale values after the drain (writethrough, naive, replica, list)", stale, "= 0", stale == 0)
	g.check("changes lost", lost, "= 0", lost == 0)
	g.check("valid changes parked", r.validParked, "= 0", r.validParked == 0)
	g.check("poison messages not parked", r.poisonUnparked, "= 0", r.poisonUnparked == 0)
	g.check("drained", drained, "true", drained)
	g.check("paths that never recovered from a fault", len(unrecovered), "= 0", len(unrecovered) == 0)
	g.worst("recovery after a fault, the worst", recoveries, lim.recovery)
	g.worst("recovery after the long outage", longOutage, lim.longOutageRecovery)
	g.worst("backlog of a fault, the worst (the driver's kill reported, not judged)", backlogs, lim.backlog)
	for name, share := range live {
		g.check(name+" (share of at least 3,000 samples)", fmt.Sprintf("%.4f", share), fmt.Sprintf("≤ %g", lim.liveStale), share <= lim.liveStale)
	}
	g.check(fmt.Sprintf("writethrough reads failed (each within %v), StaleIfError loads over 2× in the outage", lim.read), !readsOK, "false", readsOK)
	g.check("near caches: a stale hit, no hit, or StaleIfError past its bound", !nearOK, "false", nearOK)
	g.check("races with the second delete on: stale after the drain", racesStale, "= 0, drained", racesStale == 0 && racesDrained)
	r.big.print(line, &g)
	printFleet(r.fleet, line, &g, lim)
	for _, n := range r.notes {
		fmt.Println("  " + n)
	}
	ok := g.print("E2E", lim)
	fmt.Println(map[bool]string{true: "E2E PASS", false: "E2E FAIL"}[ok])
	return ok
}
