package worker

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	base := map[string]string{"CACHE_ENDPOINT": "cache.example:6379", "SECOND_DELETE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/again"}
	for _, tc := range []struct {
		name, key, value, wantErr string
	}{
		{"defaults", "", "", ""},
		{"log level", "LOG_LEVEL", "warn", ""},
		{"bad log level", "LOG_LEVEL", "loud", "LOG_LEVEL"},
		{"no endpoint", "CACHE_ENDPOINT", "", "CACHE_ENDPOINT"},
		{"bad rules", "INVALIDATION_RULES", "entities: {user: [\"\"]}", "INVALIDATION_RULES"},
		{"second delete queue", "SECOND_DELETE_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/again", ""},
		{"second delete queue not a URL", "SECOND_DELETE_QUEUE_URL", "again", "SECOND_DELETE_QUEUE_URL"},
		{"second delete off", "SECOND_DELETE_DELAY", "0s", ""},
		{"second delete later", "SECOND_DELETE_DELAY", "15m", ""},
		{"second delete too late", "SECOND_DELETE_DELAY", "16m", "SECOND_DELETE_DELAY"},
		{"second delete in milliseconds", "SECOND_DELETE_DELAY", "1500ms", "SECOND_DELETE_DELAY"},
		{"replica reads", "CACHE_REPLICA_READS", "true", "CACHE_REPLICA_READS"},
		{"keys too long for a second delete", "INVALIDATION_RULES", "maxKeyBytes: 50000", "maxKeyBytes"},
		// Left set by an old deployment, a variable no longer read stops
		// nothing.
		{"no longer read", "REDELETE_MAX_KEYS", "1000000", ""},
		{"a window", "FAILOVER_WINDOW_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/window", ""},
		{"a window's slots", "FAILOVER_WINDOW_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/w1,https://sqs.us-east-1.amazonaws.com/1/w2", ""},
		{"a window's slot twice", "FAILOVER_WINDOW_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/w1,https://sqs.us-east-1.amazonaws.com/1/w1", "twice"},
		{"a window's slot not a URL", "FAILOVER_WINDOW_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/w1,w2", "FAILOVER_WINDOW_QUEUE_URL"},
		{"announce channel", "ANNOUNCE_CHANNEL", "invalidator:near", ""},
		{"announce channel pattern", "ANNOUNCE_CHANNEL", "invalidator:*", "ANNOUNCE_CHANNEL"},
		{"announce channel with a space", "ANNOUNCE_CHANNEL", "near cache", "ANNOUNCE_CHANNEL"},
		{"the cache's ECPUs", "CACHE_MAX_ECPU_PER_SECOND", "5000", ""},
		{"the cache's ECPUs not a number", "CACHE_MAX_ECPU_PER_SECOND", "5k", "CACHE_MAX_ECPU_PER_SECOND"},
		{"the cache's ECPUs below 0", "CACHE_MAX_ECPU_PER_SECOND", "-1", "CACHE_MAX_ECPU_PER_SECOND"},
		{"the cache's ECPUs below ElastiCache's least", "CACHE_MAX_ECPU_PER_SECOND", "999", "CACHE_MAX_ECPU_PER_SECOND"},
		{"the cache's ECPUs at ElastiCache's least", "CACHE_MAX_ECPU_PER_SECOND", "1000", ""},
		{"a share of none", "CACHE_WORKER_ECPU_SHARE", "0", "CACHE_WORKER_ECPU_SHARE"},
		{"a share over all", "CACHE_WORKER_ECPU_SHARE", "101", "CACHE_WORKER_ECPU_SHARE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{tc.key: tc.value}
			for k, v := range base {
				if _, set := env[k]; !set {
					env[k] = v
				}
			}
			_, err := ConfigFromEnv(func(k string) string { return env[k] })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

func TestTheBudgetIsTheShareOfTheCachesMaximum(t *testing.T) {
	for _, tc := range []struct {
		most, share string
		want        float64
	}{{"", "", 0}, {"5000", "", 1250}, {"5000", "10", 500}, {"", "50", 0}} {
		env := map[string]string{"CACHE_ENDPOINT": "cache.example:6379", "CACHE_MAX_ECPU_PER_SECOND": tc.most, "CACHE_WORKER_ECPU_SHARE": tc.share}
		c, err := ConfigFromEnv(func(k string) string { return env[k] })
		if err != nil || c.ECPUPerSecond != tc.want {
			t.Errorf("maximum %q, share %q: %v ECPUs a second (%v), want %v", tc.most, tc.share, c.ECPUPerSecond, err, tc.want)
		}
	}
}

func TestNewLoggerWritesUTC(t *testing.T) {
	// A record timed in another zone than UTC, whatever this host's: not by
	// setting time.Local, which the goroutines of clients other tests
	// closed may still read.
	at := time.Date(2026, 1, 2, 12, 0, 0, 0, time.FixedZone("UTC+9", 9*60*60))
	var out strings.Builder
	if err := NewLogger(&out, slog.LevelInfo).Handler().Handle(t.Context(), slog.NewRecord(at, slog.LevelInfo, "batch", 0)); err != nil {
		t.Fatal(err)
	}
	NewLogger(&out, slog.LevelWarn).Info("hidden")
	var line struct{ Time, Level, Msg string }
	if err := json.Unmarshal([]byte(out.String()), &line); err != nil {
		t.Fatalf("one JSON line was expected: %v\n%s", err, out.String())
	}
	if line.Time != "2026-01-02T03:00:00Z" || line.Msg != "batch" {
		t.Fatalf("time %q, msg %q: want 2026-01-02T03:00:00Z, in UTC, and the batch line", line.Time, line.Msg)
	}
}
