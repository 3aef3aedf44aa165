package poller

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Options configure a poller. QueueURL is required; the rest have defaults.
type Options struct {
	// QueueURL is the queue to consume (QUEUE_URL). Required.
	QueueURL string
	// Receivers is how many receive loops always run (POLLER_RECEIVERS).
	// Default 2.
	Receivers int
	// MaxReceivers is how many may run while a backlog lasts
	// (POLLER_MAX_RECEIVERS): a receive that brings a full batch starts
	// one more, and one beyond Receivers ends at a receive that does not.
	// So an outage's backlog drains fast, and a fresh change does not wait
	// long behind it; once it is drained, receives are full again. Default 8.
	MaxReceivers int
	// WaitTime is the long-polling wait of each receive (POLLER_WAIT_TIME,
	// 1-20 s). A stop signal lets the receives in flight end, so that the
	// messages they bring are handed back rather than left hidden: stopping
	// takes up to this long, plus the batches in flight. Default 20 s.
	WaitTime time.Duration
	// MaxMessages is the most messages one receive asks for, and so one
	// batch holds (POLLER_MAX_MESSAGES, 1-10). Default 10.
	MaxMessages int32
	// VisibilityTimeout is how long received messages stay hidden; while a
	// batch runs it is extended by as much every half of it
	// (POLLER_VISIBILITY_TIMEOUT). Default 30 s.
	VisibilityTimeout time.Duration
	// BatchTimeout bounds one batch's processing (POLLER_BATCH_TIMEOUT).
	// Default 60 s.
	BatchTimeout time.Duration
	// HealthAddr serves GET /healthz (HEALTH_ADDR, "off" turns it off).
	// Default ":8080"; empty in Options means off.
	HealthAddr string
	// StatsEvery is how often a line of the process's goroutines and memory
	// is logged (POLLER_STATS_INTERVAL); negative: never. Default a minute.
	StatsEvery time.Duration
	// Backoff is the first pause after SQS fails, doubled up to
	// MaxBackoff, with jitter (wait.Backoff). Defaults 200 ms and 20 s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// OptionsFromEnv reads the poller's variables through getenv.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{QueueURL: getenv("QUEUE_URL"), HealthAddr: healthAddr(getenv)}
	if o.QueueURL == "" {
		return o, errors.New("QUEUE_URL is required: the URL of the queue to consume")
	}
	var err error
	if o.Receivers, err = intEnv(getenv, "POLLER_RECEIVERS", 2, 1, 100); err != nil {
		return o, err
	}
	if o.MaxReceivers, err = intEnv(getenv, "POLLER_MAX_RECEIVERS", max(8, o.Receivers), o.Receivers, 100); err != nil {
		return o, err
	}
	most, err := intEnv(getenv, "POLLER_MAX_MESSAGES", 10, 1, 10)
	if err != nil {
		return o, err
	}
	o.MaxMessages = int32(most)
	if o.VisibilityTimeout, err = durationEnv(getenv, "POLLER_VISIBILITY_TIMEOUT", 30*time.Second); err != nil {
		return o, err
	}
	if o.BatchTimeout, err = durationEnv(getenv, "POLLER_BATCH_TIMEOUT", 60*time.Second); err != nil {
		return o, err
	}
	if o.StatsEvery, err = durationEnv(getenv, "POLLER_STATS_INTERVAL", time.Minute); err != nil {
		return o, err
	}
	if o.WaitTime, err = durationEnv(getenv, "POLLER_WAIT_TIME", 20*time.Second); err == nil && o.WaitTime > 20*time.Second {
		err = fmt.Errorf("POLLER_WAIT_TIME=%q: want 1s to 20s, SQS's longest poll", getenv("POLLER_WAIT_TIME"))
	}
	return o, err
}

func intEnv(getenv func(string) string, key string, def, lo, hi int) (int, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: want a whole number from %d to %d", key, v, lo, hi)
	}
	return n, nil
}

func durationEnv(getenv func(string) string, key string, def time.Duration) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second || d > 12*time.Hour {
		return 0, fmt.Errorf("%s=%q: want a duration from 1s to 12h, like 30s", key, v)
	}
	return d, nil
}

func (o *Options) defaults() {
	if o.Receivers <= 0 {
		o.Receivers = 2
	}
	if o.MaxReceivers == 0 {
		o.MaxReceivers = 8
	}
	o.MaxReceivers = max(o.MaxReceivers, o.Receivers)
	if o.WaitTime <= 0 || o.WaitTime > 20*time.Second {
		o.WaitTime = 20 * time.Second
	}
	o.WaitTime = max(o.WaitTime, time.Second) // less would be short polling, a busy loop
	if o.MaxMessages <= 0 || o.MaxMessages > 10 {
		o.MaxMessages = 10
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = 30 * time.Second
	}
	o.VisibilityTimeout = max(o.VisibilityTimeout, time.Second) // SQS counts in seconds
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = 60 * time.Second
	}
	if o.StatsEvery == 0 {
		o.StatsEvery = time.Minute
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 20 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}
