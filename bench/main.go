// Command bench measures the invalidation core against references taken in
// the same run, on the same server, and prints one line per figure:
//
//	BENCH <name> <value>
//
// It expects the cache configuration in the environment (make bench starts a
// single-node TLS cluster for it, the shape ElastiCache Serverless shows)
// and valkey-benchmark (or redis-benchmark) on PATH.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/serverinfo"
)

func main() {
	var tp throughputOptions
	flag.IntVar(&tp.total, "events", 400_000, "events through the invalidation pipeline, per round")
	flag.IntVar(&tp.batch, "batch", 1000, "SQS messages per batch")
	flag.IntVar(&tp.naiveTotal, "naive-events", 10_000, "events through the naive loop, per round")
	flag.IntVar(&tp.refTotal, "reference-requests", 2_000_000, "redis-benchmark requests, per round")
	flag.IntVar(&tp.rounds, "rounds", 3, "rounds of reference, pipeline and naive loop; the medians count")
	flag.StringVar(&tp.cpuProfile, "cpuprofile", "", "write a CPU profile of the pipeline runs to this file")
	var (
		bin      = flag.String("bin", "bin", "directory of the built functions (make build)")
		coldRuns = flag.Int("cold-starts", 101, "cold-start pairs (hello, sqs-invalidate) measured; the median counts")
		only     = flag.String("only", "", "comma-separated groups to run (coldstart, decode, throughput, memory, reads, near, fleet, tags, budget, lock, hostile, cost); all when empty")
		costCell = flag.String("cost-cell", "", "the one cell of the cost group to run, e.g. sqs_b10_sd; its tables are not written")
		outDir   = flag.String("out", "../.local/bench", "where to write this run's results: latest.md, cost.md (the cost group's tables) and throughput.svg")
		readme   = flag.Bool("readme", false, "also write them into README.md's sections and throughput.svg here, the tracked ones (make bench-record)")
	)
	flag.Parse()
	log.SetFlags(0)
	groups := strings.Split(*only, ",")
	run := func(group string) bool { return *only == "" || slices.Contains(groups, group) }
	out := results{dir: *outDir, readme: *readme}
	if err := os.MkdirAll(out.dir, 0o755); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// The decode group needs no cache: run alone, it runs without one.
	var s server
	if *only == "" || slices.ContainsFunc(groups, func(g string) bool { return g != "decode" }) {
		s = connect(ctx)
		defer s.client.Close()
	}

	// Cold starts first, while this process is small and idle: on two
	// CPUs its garbage collector, sweeping after the throughput runs,
	// would otherwise compete with the emulator, the function and the
	// server's TLS handshake, and with hello less than with the function.
	if run("coldstart") {
		coldstartGroup(s, *bin, *coldRuns)
	}
	if run("decode") {
		decodeGroup()
	}
	if run("throughput") {
		throughputGroup(ctx, s, tp, out)
	}
	if run("memory") {
		memoryGroup(ctx, s, *bin)
	}
	if run("reads") {
		readsGroup(ctx, s)
	}
	if run("near") {
		nearGroup(ctx, s, *bin)
	}
	if run("fleet") {
		fleetGroup(ctx, s)
	}
	if run("tags") {
		tagsGroup(ctx, s)
	}
	if run("budget") {
		budgetGroup(ctx, s)
	}
	if run("lock") {
		lockGroup(ctx, s)
	}
	if run("hostile") {
		hostileGroup(ctx)
	}
	if run("cost") {
		costGroup(ctx, s.client, *bin, *costCell, out)
	}
	if err := out.writeLatest(); err != nil {
		log.Fatal(err)
	}
}

// connect opens the cache server the groups measure.
func connect(ctx context.Context) server {
	cfg, err := elasticache.ConfigFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	client, err := elasticache.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if serverName, err = serverinfo.Of(ctx, client); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("BENCH server %s\n", serverName)
	s := server{cfg: cfg, client: client}
	s.used, s.local = serverCPU(ctx, client)
	return s
}
