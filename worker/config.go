package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/env"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Config is what every front end reads from its environment: what a
// deployment chooses. What it does not choose is a constant of Start
// (start.go), or a field of Options for the tests that build a Worker
// themselves.
type Config struct {
	Cache elasticache.Config // CACHE_*
	Rules *invalidate.Rules  // INVALIDATION_RULES, INVALIDATION_RULES_FILE
	// FailureQueueURL is FAILURE_QUEUE_URL: where records that fail for
	// good are parked as they came. Default none: they are handed back to their
	// source like those that fail for now, and reach its DLQ or on-failure
	// destination once its retries are spent.
	FailureQueueURL string
	// SecondDeleteQueueURL is SECOND_DELETE_QUEUE_URL: the delay queue of
	// second deletes, which the SQS function and the poller consume too.
	// Default none: one delete.
	SecondDeleteQueueURL string
	// SecondDeleteDelay is SECOND_DELETE_DELAY: how long after a record's
	// keys are deleted they are deleted again, in whole seconds up to 15
	// minutes. Default 2s; 0 turns second deletes off.
	SecondDeleteDelay time.Duration
	// FailoverRedeleteAfter is FAILOVER_REDELETE_AFTER: how long after a
	// record's keys are deleted the failover schedule deletes them once
	// more, through the delay queue, in whole seconds up to 15 minutes:
	// longer than the replication lag a failover can lose. Default 60s; 0
	// turns it off.
	FailoverRedeleteAfter time.Duration
	// FailoverWindowQueueURL is FAILOVER_WINDOW_QUEUE_URL: the queue that
	// keeps the fleet's last minute of deletes, read and deleted again when
	// a process sees a sign of a failover (Window), or the queues of its
	// slots, comma-separated, in the order they are taken. Default none: a
	// failover no client sees and one they all see are repaired alike, by
	// the failover schedule.
	FailoverWindowQueueURL string
	// AnnounceChannel is ANNOUNCE_CHANNEL: the pub/sub channel on which the
	// keys of every delete are announced once it succeeded, for the
	// services' local tiers (writethrough/near). The cache user needs
	// +publish and &<channel>. Default none: nothing is announced.
	AnnounceChannel string
	// ECPUPerSecond is the most ECPUs a second each worker process asks of
	// the cache, or with MaxProcesses the fleet together, through the
	// budget they share in it (invalidate.ValkeyBudget): CACHE_WORKER_ECPU_SHARE percent
	// (default 25) of CACHE_MAX_ECPU_PER_SECOND, the cache's ECPUPerSecond
	// maximum (1,000 to 15,000,000). Default 0, without a maximum: no limit.
	ECPUPerSecond float64
	// MaxProcesses is CACHE_WORKER_MAX_PROCESSES, the most worker processes
	// the fleet runs at once (template.yaml's WorkerMaxProcesses): when set,
	// they share ECPUPerSecond through one budget in the cache, and while
	// it cannot be read each asks at most ECPUPerSecond divided by it.
	// Default 0: each process asks ECPUPerSecond on its own.
	MaxProcesses int
	// LogLevel is LOG_LEVEL: debug, info (default), warn or error.
	LogLevel slog.Level
}

// minCacheECPUPerSecond is the least ECPUPerSecond maximum ElastiCache
// Serverless takes.
const minCacheECPUPerSecond = 1000

// ConfigFromEnv reads and validates the configuration; the error names the
// variable at fault. The table of docs/operations.md ("Configuration")
// lists the variables, docs_env_test.go checks it against those read.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	var err error
	if c.Cache, err = elasticache.ConfigFromEnv(getenv); err != nil {
		return c, err
	}
	if c.Cache.ReplicaReads {
		// A tag's members read on a replica could miss the entries added
		// last, which its invalidation must delete.
		return c, errors.New("CACHE_REPLICA_READS=true: the worker reads its tags on the primaries; leave it unset")
	}
	if c.Rules, err = invalidate.RulesFromEnv(getenv); err != nil {
		return c, err
	}
	if c.FailureQueueURL = env.String(getenv, "FAILURE_QUEUE_URL"); c.FailureQueueURL != "" {
		if err := checkQueueURL("FAILURE_QUEUE_URL", c.FailureQueueURL); err != nil {
			return c, err
		}
	}
	if c.SecondDeleteQueueURL = env.String(getenv, "SECOND_DELETE_QUEUE_URL"); c.SecondDeleteQueueURL != "" {
		if err := checkQueueURL("SECOND_DELETE_QUEUE_URL", c.SecondDeleteQueueURL); err != nil {
			return c, err
		}
	}
	if c.SecondDeleteDelay, err = env.Duration(getenv, "SECOND_DELETE_DELAY", 2*time.Second, 0, 15*time.Minute); err != nil {
		return c, err
	}
	if c.SecondDeleteDelay%time.Second != 0 {
		return c, fmt.Errorf("SECOND_DELETE_DELAY=%v: want whole seconds from 0 (off) to 15m, like 2s", c.SecondDeleteDelay)
	}
	if c.FailoverRedeleteAfter, err = env.Duration(getenv, "FAILOVER_REDELETE_AFTER", time.Minute, 0, 15*time.Minute); err != nil {
		return c, err
	}
	if c.FailoverRedeleteAfter%time.Second != 0 {
		return c, fmt.Errorf("FAILOVER_REDELETE_AFTER=%v: want whole seconds from 0 (off) to 15m, like 60s", c.FailoverRedeleteAfter)
	}
	if c.FailoverWindowQueueURL = env.String(getenv, "FAILOVER_WINDOW_QUEUE_URL"); c.FailoverWindowQueueURL != "" {
		slots := c.windowSlots()
		for i, url := range slots {
			if err := checkQueueURL("FAILOVER_WINDOW_QUEUE_URL", url); err != nil {
				return c, err
			}
			if slices.Contains(slots[:i], url) {
				return c, fmt.Errorf("FAILOVER_WINDOW_QUEUE_URL lists %s twice: a slot taken again within the minute it keeps", url)
			}
		}
	}
	again := c.SecondDeleteQueueURL != "" && c.deletesAgain()
	if most := events.MaxAgainBytes(c.Rules.MaxKeyBytes()); (again || c.FailoverWindowQueueURL != "") && most > DefaultDelayMaxBytes {
		return c, fmt.Errorf("INVALIDATION_RULES: a key of the rules' maxKeyBytes (%d) takes up to %d bytes in a second-delete message, more than the delay queue's %d (DefaultDelayMaxBytes, template.yaml's MaximumMessageSize); lower maxKeyBytes",
			c.Rules.MaxKeyBytes(), most, DefaultDelayMaxBytes)
	}
	if c.AnnounceChannel = env.String(getenv, "ANNOUNCE_CHANNEL"); strings.ContainsAny(c.AnnounceChannel, " \t\n*?[]") || len(c.AnnounceChannel) > 256 {
		return c, fmt.Errorf("ANNOUNCE_CHANNEL=%q: want a channel name without spaces or ACL wildcards, like invalidator:near", c.AnnounceChannel)
	}
	// ElastiCache takes no maximum below 1,000 (template.yaml's MinValue):
	// a lower one is a typo, and would pace the worker to a key a second.
	most, err := env.Int(getenv, "CACHE_MAX_ECPU_PER_SECOND", 0, minCacheECPUPerSecond, 15_000_000)
	if err != nil {
		return c, err
	}
	share, err := env.Int(getenv, "CACHE_WORKER_ECPU_SHARE", 25, 1, 100)
	if err != nil {
		return c, err
	}
	c.ECPUPerSecond = float64(most) * float64(share) / 100
	if c.MaxProcesses, err = env.Int(getenv, "CACHE_WORKER_MAX_PROCESSES", 0, 0, 100_000); err != nil {
		return c, err
	}
	if v := env.String(getenv, "LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	return c, nil
}

// deletesAgain says whether second deletes or the failover schedule are on.
func (c Config) deletesAgain() bool { return c.SecondDeleteDelay > 0 || c.FailoverRedeleteAfter > 0 }

// checkQueueURL says what is wrong with the queue URL in variable key.
func checkQueueURL(key, v string) error {
	if u, err := url.Parse(v); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%s=%q: want the queue's URL, like https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-failures", key, v)
	}
	return nil
}

// windowSlots are the failover window's queues, FAILOVER_WINDOW_QUEUE_URL's
// comma-separated URLs, in the order they are taken.
func (c Config) windowSlots() []string { return strings.Split(c.FailoverWindowQueueURL, ",") }

// invalidateOptions are the Invalidator's options of c, its ECPUs taken from
// fleet, the budget the fleet shares; log says when fleet cannot be read,
// and when it can again.
func (c Config) invalidateOptions(fleet invalidate.Budget, log *slog.Logger) invalidate.Options {
	opts := invalidate.Options{Rules: c.Rules, ECPUPerSecond: c.ECPUPerSecond}
	if c.ECPUPerSecond > 0 && c.MaxProcesses > 0 {
		opts.Fleet, opts.FallbackECPUPerSecond = fleet, c.ECPUPerSecond/float64(c.MaxProcesses)
		opts.OnFleetDown = func(err error) {
			if err != nil {
				log.Warn("the fleet's ECPU budget cannot be read: asking at most the fallback share until it can", "error", err.Error(),
					"fallback_ecpu_per_second", opts.FallbackECPUPerSecond, "fleet_ecpu_per_second", c.ECPUPerSecond)
			} else {
				log.Info("the fleet's ECPU budget is read again", "fleet_ecpu_per_second", c.ECPUPerSecond)
			}
		}
	}
	return opts
}
