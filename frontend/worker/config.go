package worker

import (
	"fmt"
	"log/slog"
	"net/url"
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
	// good are parked, whole. Default none: they are handed back to their
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
	// LogLevel is LOG_LEVEL: debug, info (default), warn or error.
	LogLevel slog.Level
	// Namespace is METRICS_NAMESPACE, default "Invalidator": a CloudWatch
	// namespace, up to 255 of A-Z a-z 0-9 . - _ / # : and space, not
	// beginning with AWS/.
	Namespace string
}

// LoadConfig reads and validates the configuration; the error names the
// variable at fault.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	var err error
	if c.Cache, err = elasticache.FromEnv(getenv); err != nil {
		return c, err
	}
	if c.Rules, err = invalidate.LoadRules(getenv); err != nil {
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
