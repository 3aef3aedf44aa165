// Command poller consumes the invalidation queue for as long as it runs, for
// ECS and EC2: long polling, deletes only what succeeded, drains on SIGTERM.
// With second deletes it consumes their delay queue too.
//
// poller -healthcheck asks a running poller's GET /healthz and exits 0 when
// it is healthy, 1 otherwise: the container health check, for images that
// have no shell or curl.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/sync/errgroup"

	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/poller"
)

func main() {
	healthcheck := flag.Bool("healthcheck", false, "ask the running poller's GET /healthz (HEALTH_ADDR) and exit 0 when it answers 200, else 1")
	flag.Parse()
	if *healthcheck {
		os.Exit(checkHealth())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		worker.LogStartFailure("poller", err)
		os.Exit(1)
	}
}

// checkHealth is the exit status of poller -healthcheck.
func checkHealth() int {
	// Within the 5 s health check timeout the template gives ECS.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := poller.CheckHealth(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "poller: unhealthy:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context) error {
	cfg, err := worker.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	opts, err := poller.OptionsFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	aws, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	cfg.Cache.SignWith(aws.Region, aws.Credentials)
	if s := cfg.Cache.PasswordSecret; s != nil {
		s.Read = worker.SecretPassword(secretsmanager.NewFromConfig(aws))
	}
	queues := sqs.NewFromConfig(aws)
	w, err := worker.Start("poller", cfg, queues)
	if err != nil {
		return err
	}
	defer w.Close()
	opts.Logger, opts.Region = slog.Default(), aws.Region
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return poller.Run(ctx, queues, w, opts) })
	if cfg.SecondDeleteQueueURL != "" { // consumed even when off: what is left in it
		delayed := opts
		delayed.QueueURL, delayed.HealthAddr, delayed.StatsEvery = cfg.SecondDeleteQueueURL, "", -1 // one health endpoint, one stats line
		g.Go(func() error { return poller.Run(ctx, queues, w, delayed) })
	}
	return g.Wait()
}
