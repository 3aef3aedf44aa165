package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Config is what every front end reads from its environment.
type Config struct {
	Cache elasticache.Config // CACHE_*
	Rules *invalidate.Rules
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
	// SecondDeleteMaxBytes is SECOND_DELETE_MAX_BYTES: the delay queue's
	// MaximumMessageSize, to which second-delete messages are sized as
	// sent. Default 262144 (DefaultDelayMaxBytes), as template.yaml sets
	// it; at most SQS's 1048576, and room for the longest key the rules
	// allow, escaped (maxEscapedBytes).
	SecondDeleteMaxBytes int
	// RetryFor is RETRY_FOR: how long an SQS or stream batch retries the
	// keys that fail for now before their records go back to their source.
	// Default 1s.
	RetryFor time.Duration
	// RedeleteWindow is REDELETE_WINDOW: how far back the keys deleted
	// before a reconnect are deleted again, which must be at least the
	// cache's replication lag (ElastiCache bounds none). Default 30s; 0
	// turns re-deletes off.
	RedeleteWindow time.Duration
	// RedeleteMaxBytes is REDELETE_MAX_BYTES: the most memory the window
	// takes, its keys and its slots (NewRecent). Default
	// defaultRedeleteMaxBytes.
	RedeleteMaxBytes int
	// RedeleteOnNewNodes is REDELETE_ON_NEW_NODES: whether a connection to
	// a node that was not in the cluster at the start (a node-based
	// cluster's promoted replica) sets a re-delete off, beside a
	// reconnect. Default true.
	RedeleteOnNewNodes bool
	// Unread says which variables that are set are no longer read, and
	// what replaces each: Start logs them.
	Unread []string
	// AnnounceChannel is ANNOUNCE_CHANNEL: the pub/sub channel on which the
	// keys of every delete are announced once it succeeded, for the
	// services' local tiers (writethrough/local). The cache user needs
	// +publish and &<channel>. Default none: nothing is announced.
	AnnounceChannel string
	// AnnounceHeartbeat is ANNOUNCE_HEARTBEAT: how often, while it runs, the
	// worker publishes its sequence number, which shows the local tiers an
	// announcement of its they missed. Default 1s; 0 turns it off.
	AnnounceHeartbeat time.Duration
	// LogLevel is LOG_LEVEL: debug, info (default), warn or error.
	LogLevel slog.Level
	// Namespace is METRICS_NAMESPACE, default "Invalidator": a CloudWatch
	// namespace, up to 255 of A-Z a-z 0-9 . - _ / # : and space, not
	// beginning with AWS/.
	Namespace string
}

// ConfigFromEnv reads and validates the configuration; the error names the
// variable at fault.
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
	if c.FailureQueueURL = getenv("FAILURE_QUEUE_URL"); c.FailureQueueURL != "" {
		if err := checkQueueURL("FAILURE_QUEUE_URL", c.FailureQueueURL); err != nil {
			return c, err
		}
	}
	if c.SecondDeleteQueueURL = getenv("SECOND_DELETE_QUEUE_URL"); c.SecondDeleteQueueURL != "" {
		if err := checkQueueURL("SECOND_DELETE_QUEUE_URL", c.SecondDeleteQueueURL); err != nil {
			return c, err
		}
	}
	c.SecondDeleteDelay = 2 * time.Second
	if v := getenv("SECOND_DELETE_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 15*time.Minute || d%time.Second != 0 {
			return c, fmt.Errorf("SECOND_DELETE_DELAY=%q: want whole seconds from 0 (off) to 15m, like 2s", v)
		}
		c.SecondDeleteDelay = d
	}
	c.SecondDeleteMaxBytes = DefaultDelayMaxBytes
	if v := getenv("SECOND_DELETE_MAX_BYTES"); v != "" {
		if c.SecondDeleteMaxBytes, err = strconv.Atoi(v); err != nil || c.SecondDeleteMaxBytes < 1024 || c.SecondDeleteMaxBytes > 1<<20 {
			return c, fmt.Errorf("SECOND_DELETE_MAX_BYTES=%q: want the delay queue's MaximumMessageSize, 1024 to 1048576 bytes", v)
		}
	}
	if most := maxEscapedBytes(c.Rules.MaxKeyBytes()); c.SecondDeleteQueueURL != "" && c.SecondDeleteDelay > 0 && most > c.SecondDeleteMaxBytes {
		return c, fmt.Errorf("SECOND_DELETE_MAX_BYTES=%d: a key of the rules' maxKeyBytes (%d) takes up to %d bytes in a second-delete message; raise it (and the queue's MaximumMessageSize), lower maxKeyBytes, or turn second deletes off (SECOND_DELETE_DELAY=0s)",
			c.SecondDeleteMaxBytes, c.Rules.MaxKeyBytes(), most)
	}
	if c.RetryFor, err = duration(getenv, "RETRY_FOR", time.Second); err != nil || c.RetryFor == 0 {
		return c, cmp.Or(err, fmt.Errorf("RETRY_FOR=0s: want a positive duration, like 1s"))
	}
	if c.RedeleteWindow, err = duration(getenv, "REDELETE_WINDOW", 30*time.Second); err != nil {
		return c, err
	}
	c.RedeleteMaxBytes = defaultRedeleteMaxBytes
	if v := getenv("REDELETE_MAX_BYTES"); v != "" {
		if c.RedeleteMaxBytes, err = strconv.Atoi(v); err != nil || c.RedeleteMaxBytes < 1<<20 {
			return c, fmt.Errorf("REDELETE_MAX_BYTES=%q: want a number of bytes, at least 1048576 (1 MiB)", v)
		}
	}
	if getenv("REDELETE_MAX_KEYS") != "" {
		// Warned of, not refused: an update that leaves it set must not
		// stop every function at init, and the shards behind them.
		c.Unread = append(c.Unread, fmt.Sprintf("REDELETE_MAX_KEYS is no longer read: the window is bounded in bytes, REDELETE_MAX_BYTES (default %d)", defaultRedeleteMaxBytes))
	}
	c.RedeleteOnNewNodes = true
	if v := getenv("REDELETE_ON_NEW_NODES"); v != "" {
		if c.RedeleteOnNewNodes, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("REDELETE_ON_NEW_NODES=%q: want true or false", v)
		}
	}
	if c.AnnounceChannel = getenv("ANNOUNCE_CHANNEL"); strings.ContainsAny(c.AnnounceChannel, " \t\n*?[]") || len(c.AnnounceChannel) > 256 {
		return c, fmt.Errorf("ANNOUNCE_CHANNEL=%q: want a channel name without spaces or ACL wildcards, like invalidator:near", c.AnnounceChannel)
	}
	if c.AnnounceHeartbeat, err = duration(getenv, "ANNOUNCE_HEARTBEAT", time.Second); err != nil {
		return c, err
	}
	if v := getenv("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	if c.Namespace = getenv("METRICS_NAMESPACE"); c.Namespace != "" && !validNamespace(c.Namespace) {
		return c, fmt.Errorf("METRICS_NAMESPACE=%q: want up to 255 of A-Z a-z 0-9 . - _ / # : and space, not beginning with AWS/", c.Namespace)
	}
	return c, nil
}

// duration reads variable key, a Go duration of 0 or more, def when unset.
func duration(getenv func(string) string, key string, def time.Duration) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration like 30s, or 0s for none", key, v)
	}
	return d, nil
}

// checkQueueURL says what is wrong with the queue URL in variable key.
func checkQueueURL(key, v string) error {
	if u, err := url.Parse(v); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%s=%q: want the queue's URL, like https://sqs.us-east-1.amazonaws.com/123456789012/cache-invalidation-failures", key, v)
	}
	return nil
}

// validNamespace says whether CloudWatch accepts ns as a namespace.
func validNamespace(ns string) bool {
	if len(ns) > 255 || strings.TrimSpace(ns) == "" || strings.HasPrefix(ns, "AWS/") {
		return false
	}
	for _, c := range ns {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune(".-_/#: ", c)) {
			return false
		}
	}
	return true
}
