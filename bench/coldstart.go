package main

import (
	"context"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/invalidator-go/invalidator/localstack/rie"
)

// coldstartGroup times runs rounds of cold starts of hello, helloconnect
// and sqs-invalidate, and the server's CPU time per cold start of
// sqs-invalidate.
func coldstartGroup(s server, bin string, runs int) {
	hello, helloConnect := build("hello"), build("helloconnect")
	defer os.RemoveAll(filepath.Dir(hello))
	defer os.RemoveAll(filepath.Dir(helloConnect))
	c := coldStarts([]coldFunction{{hello, nil}, {helloConnect, functionEnv()},
		{filepath.Join(bin, "sqs-invalidate", "bootstrap"), functionEnv()}}, runs, s.used)
	print("coldstart_hello_ms", c.ms[0])
	print("coldstart_hello_connect_ms", c.ms[1])
	print("coldstart_sqs_invalidate_ms", c.ms[2])
	print("coldstart_vs_hello", c.vs[0])
	print("coldstart_vs_hello_connect", c.vs[1])
	if s.local {
		print("coldstart_server_cpu_ms", ms(c.serverCPU)/float64(runs))
	}
}

// coldFunction is a bootstrap and its environment.
type coldFunction struct {
	bootstrap string
	env       []string
}

// coldResult holds each function's median cold start in ms, the median
// ratios of the last function's to each other's, and the server CPU the
// last one's cold starts used.
type coldResult struct {
	ms, vs    []float64
	serverCPU time.Duration
}

// coldStarts times first invokes — a function's init and its first handler
// call — from outside fresh emulators, in rounds of one cold start of each
// function, so that all see the same machine, the order rotating from round
// to round. The last function is the one measured against the others.
func coldStarts(fns []coldFunction, runs int, serverUsed func() time.Duration) coldResult {
	times := make([][]float64, len(fns))
	ratios := make([][]float64, len(fns)-1)
	var r coldResult
	for i := range runs {
		round := make([]time.Duration, len(fns))
		for k := range fns {
			j := (i + k) % len(fns)
			before := serverUsed()
			round[j] = coldStart(fns[j].bootstrap, fns[j].env)
			if j == len(fns)-1 {
				r.serverCPU += serverUsed() - before
			}
		}
		for j, d := range round {
			times[j] = append(times[j], ms(d))
			if j < len(fns)-1 {
				ratios[j] = append(ratios[j], float64(round[len(fns)-1])/float64(d))
			}
		}
	}
	for _, t := range times {
		r.ms = append(r.ms, median(t))
	}
	for _, x := range ratios {
		r.vs = append(r.vs, median(x))
	}
	return r
}

func coldStart(bootstrap string, env []string) time.Duration {
	fn, err := rie.Start(bootstrap, rie.Options{Env: env, Output: io.Discard})
	if err != nil {
		log.Fatal(err)
	}
	defer fn.Stop()
	start := time.Now()
	if _, err := fn.Invoke(context.Background(), lambdaevents.SQSEvent{Records: snsMessages(0, 1)}); err != nil {
		log.Fatalf("cold start of %s: %v", bootstrap, err)
	}
	return time.Since(start)
}
