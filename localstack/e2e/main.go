// Command e2e is make e2e: the whole pipeline on a local stack of its own
// (ports apart from make local's), with writers and readers running and
// faults injected — a cache node killed and restarted empty, one restarted
// with its data, every node frozen, slots migrated, the whole cache down
// for 5 s and for long, the poller stopped and restarted, the driver killed
// and restarted, poison messages all along — and then the count of what
// went wrong. Then two races without faults, on entities of their own, with
// the second delete off and on, show the stale values it prevents (the
// short run, CI's, gates the one with it on alone), and
// failovers of one shard, the replica behind its master, show what the
// re-delete after a reconnect saves. It prints E2E <name> <value> lines, and
// exits non-zero when a key is stale with the second delete on, a valid
// change was parked or lost, a poison message was not parked, a path did
// not invalidate a fresh change within 2 s of a fault's end or the changes
// written during it within 10 s, the keys of the nodes that stayed up were
// stale a second after their change more than once in 1,000 while one node
// was down, or a read through writethrough failed other than by its loader.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/localstack/serverinfo"
)

// plan is how long each part of a run lasts, and its failovers.
type plan struct {
	warmup, steady, nodeDown, freeze, cacheDown, restart, race, throttle time.Duration
	failovers                                                            []failoverPlan
	bigChanges                                                           int           // the budget-exceeded fault's message
	reshard                                                              int           // the slots slots-migrated moves
	fleet                                                                time.Duration // each run of the fleet's budget
	fleetReferences                                                      bool          // the fleet unshared, and without the reserve, beside it
	raceReference                                                        bool          // the race with the second delete off too: the stale values it prevents
}

// failoverPlan is a failover with the replica lag behind its master, the
// second delete on or off; an invisible one moves the clients' connections
// to the promoted replica without closing them.
type failoverPlan struct {
	lag                     time.Duration
	secondDelete, invisible bool
}

func (f failoverPlan) delay(secondDelete time.Duration) time.Duration {
	return map[bool]time.Duration{true: secondDelete}[f.secondDelete]
}

// The replica is behind by less than the second delete's delay (1 s against
// 5 s), and by more (6 s), when the deletes and their second deletes are
// lost together; the short run, CI's, has the hardest ones only: behind by
// more, the second delete off, the re-delete alone to bring the keys back,
// the connections dropped or, invisible, moved.
var (
	full = plan{warmup: 15 * time.Second, steady: 15 * time.Second, nodeDown: 5 * time.Second, freeze: 10 * time.Second, cacheDown: 60 * time.Second, restart: 2 * time.Second, race: 30 * time.Second, throttle: 10 * time.Second,
		failovers: []failoverPlan{{time.Second, true, false}, {time.Second, false, false}, {6 * time.Second, true, false}, {6 * time.Second, false, false}, {6 * time.Second, false, true}}, bigChanges: 5_000, reshard: 2000, fleet: 40 * time.Second, fleetReferences: true, raceReference: true}
	short = plan{warmup: 8 * time.Second, steady: 8 * time.Second, nodeDown: 3 * time.Second, freeze: 10 * time.Second, cacheDown: 20 * time.Second, restart: 2 * time.Second, race: 10 * time.Second, throttle: 5 * time.Second,
		failovers: []failoverPlan{{6 * time.Second, false, false}, {6 * time.Second, false, true}}, bigChanges: 3_000, reshard: 500, fleet: 20 * time.Second}
)

func main() {
	isShort := flag.Bool("short", false, "the CI form: shorter outages, pauses and races, about 4 minutes")
	bin := flag.String("bin", "bin", "directory of the built worker (make build)")
	// Loads take up to 1.5 s and the replica lags up to 0.5 s: as the
	// README advises, the delay is longer than the two together.
	secondDelete := flag.Duration("second-delete", 5*time.Second, "SECOND_DELETE_DELAY of the run and of its race with the second delete on")
	var soak soakPlan
	flag.DurationVar(&soak.steady, "soak", 0, "make soak instead: a steady load for this long, no faults")
	flag.Float64Var(&soak.rate, "soak-rate", 20, "the soak's changes a second of each kind, product and user")
	flag.DurationVar(&soak.ramp, "soak-ramp", 30*time.Second, "after the soak, each doubled rate for this long, to find the highest steady one; 0 for none")
	fleetOnly := flag.Bool("fleet", false, "only the fleet's budget: 120 processes paging tags, unshared then shared, about 2 minutes")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, lim := full, goals
	if *isShort {
		p, lim = short, stalls
	}
	soak.judgeGrowth = soak.steady >= 5*time.Minute
	prefix := map[bool]string{true: "SOAK", false: "E2E"}[soak.steady > 0]
	ok, err := onStack(ctx, *bin, *secondDelete, func(env env, s *stack) (bool, error) {
		server, err := serverOf(ctx, env)
		if err != nil {
			return false, err
		}
		fmt.Printf("%s server %s\n", prefix, server)
		if *fleetOnly {
			return runFleet(ctx, env, s, p, lim)
		}
		if soak.steady > 0 {
			if !soak.judgeGrowth {
				lim = stalls // a short soak is CI's
			}
			return runSoak(ctx, env, s, soak, lim)
		}
		return run(ctx, env, s, p, lim, *bin, *secondDelete)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// serverOf names the server the stack's cache runs, and its version.
func serverOf(ctx context.Context, e env) (string, error) {
	client, err := elasticache.New(e.cache)
	if err != nil {
		return "", err
	}
	defer client.Close()
	return serverinfo.Of(ctx, client)
}

// onStack starts the worker on the e2e stack, its second deletes delay
// after the first, runs what, and stops the worker.
func onStack(ctx context.Context, bin string, delay time.Duration, what func(env, *stack) (bool, error)) (bool, error) {
	env, err := loadEnv()
	if err != nil {
		return false, err
	}
	s, err := newStack(ctx, env, bin, delay)
	if err != nil {
		return false, err
	}
	defer s.close()
	return what(env, s)
}

func run(ctx context.Context, env env, s *stack, p plan, lim limits, bin string, secondDelete time.Duration) (bool, error) {
	start := time.Now()
	l, err := newLoad(ctx, env, "", true)
	if err != nil {
		return false, err
	}
	l.readWithin = lim.read
	if l.near, err = l.startNear(ctx); err != nil {
		return false, err
	}
	defer l.near.close()
	progress := startProgress(start, l)
	defer progress.stop()
	// invalidator inspect, and a second one reading through a local tier.
	var inspectors []*inspector
	defer func() {
		for _, in := range inspectors {
			_ = in.cmd.Process.Kill() // when the run ends early
		}
	}()
	for _, flags := range [][]string{{"inspect"}, {"inspect_local", "--local"}} {
		in, err := startInspector(env, bin, flags[0], flags[1:]...)
		if err != nil {
			return false, err
		}
		inspectors = append(inspectors, in)
	}

	l.start(ctx)
	var faults []faultResult
	progress.phase("warm-up")
	quiet := time.Now()
	wait.For(ctx, p.warmup)
	for _, f := range s.faults(p, l) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		progress.phase(f.name)
		var b *burst
		if f.stops != 0 { // the keys of the other nodes, sampled meanwhile
			down, err := slotsOf(ctx, l.cache, s.announced(f.stops))
			if err == nil {
				b, err = l.startBurst(ctx, f.name, down)
			}
			if err != nil {
				return false, fmt.Errorf("%s: %w", f.name, err)
			}
		}
		from := time.Now()
		if err := f.inject(ctx); err != nil {
			return false, fmt.Errorf("%s: %w", f.name, err)
		}
		fr := faultResult{name: f.name, quiet: quiet, from: from, to: time.Now()}
		if b != nil {
			fr.samples, fr.staleLive, fr.lateLive = b.end()
		}
		fr.probes = l.probe(ctx, f.name)
		faults = append(faults, fr)
		quiet = time.Now()
		progress.phase(f.name + ", steady")
		wait.For(ctx, p.steady)
	}
	progress.phase("draining")
	l.stopWriters()
	drain, drained := l.drain(ctx, 3*time.Minute)
	for _, in := range inspectors {
		in.stopReading()
	}
	l.stopReaders()
	progress.stop()
	r, err := l.check(ctx, s.logs())
	if err != nil {
		return false, err
	}
	delays := []time.Duration{secondDelete}
	if p.raceReference {
		delays = []time.Duration{0, secondDelete}
	}
	for _, delay := range delays {
		race, err := runRace(ctx, env, s, p.race, delay, start)
		if err != nil {
			return false, err
		}
		r.races = append(r.races, race)
	}
	if s.shard != nil {
		for _, f := range p.failovers {
			fo, err := runFailover(ctx, env, s, f.delay(secondDelete), f.lag, f.invisible, p.steady, start)
			if err != nil {
				return false, fmt.Errorf("%s: %w", fo.name(), err)
			}
			r.failovers = append(r.failovers, fo)
		}
	}
	var replicaStale []time.Duration
	if s.shard != nil {
		if replicaStale, err = s.replicaReads(ctx, 1000); err != nil {
			return false, fmt.Errorf("replica reads: %w", err)
		}
	}
	if r.fleet, err = measureFleet(ctx, env, s, p); err != nil {
		return false, fmt.Errorf("the fleet's budget: %w", err)
	}
	for _, in := range inspectors {
		inspection, err := in.report()
		if err != nil {
			return false, err
		}
		inspection.print(in.name)
	}
	if err := writeLag(filepath.Join(env.state, "lag.json"), start, r, faults); err != nil {
		return false, err
	}
	printReplicaReads(replicaStale)
	return r.print(faults, drained, drain, time.Since(start), lim), nil
}

// runRace restarts the worker with second deletes delay after the first
// (0: off), runs writers and readers without faults on entities of their
// own for d, drains, and counts the stale values left.
func runRace(ctx context.Context, env env, s *stack, d, delay time.Duration, start time.Time) (race, error) {
	r := race{delay: delay}
	if err := s.setSecondDelete(delay); err != nil {
		return r, err
	}
	name := map[bool]string{true: "off", false: "on"}[delay == 0]
	l, err := newLoad(ctx, env, "race-"+name+"-", false)
	if err != nil {
		return r, err
	}
	progress := startProgress(start, l)
	defer progress.stop()
	progress.phase("race, second delete " + name)
	l.start(ctx)
	wait.For(ctx, d)
	progress.phase("race, second delete " + name + ", draining")
	l.stopWriters()
	r.drain, r.drained = l.drain(ctx, raceDrain)
	l.stopReaders()
	r.stale, err = l.stale(ctx)
	return r, err
}

// runFleet measures the fleet's budget alone (-fleet).
func runFleet(ctx context.Context, env env, s *stack, p plan, lim limits) (bool, error) {
	runs, err := measureFleet(ctx, env, s, p)
	if err != nil {
		return false, err
	}
	var g gates
	printFleet(runs, func(name string, v any) { fmt.Printf("E2E %s %v\n", name, v) }, &g, lim)
	ok := g.print("E2E", lim)
	fmt.Println(map[bool]string{true: "E2E PASS", false: "E2E FAIL"}[ok])
	return ok, nil
}
