package poller

import (
	"errors"
	"log/slog"
	"time"

	"github.com/invalidator-go/invalidator/internal/env"
)

// Options configure a poller. QueueURL is required; the rest have defaults.
// The environment gives what a deployment chooses (OptionsFromEnv); the
// rest are constants, with their reasons, which in-process tests set here.
type Options struct {
	// QueueURL is the queue to consume (QUEUE_URL). Required.
	QueueURL string
	// Region is the queue's AWS region, for its ARN, which a parked
	// record names as where it came from; the region in an SQS URL's host
	// wins. Default us-east-1.
	Region string
	// Receivers is how many receive loops always run. Default 2: a task's
	// throughput grows with more tasks, which the template scales on the
	// queue's backlog, and with MaxReceivers while a backlog lasts.
	Receivers int
	// MaxReceivers is how many may run while a backlog lasts: a receive
	// that brings a full batch starts one more, and so does a batch held
	// past heldBatch (a node down); one beyond Receivers ends at a
	// receive that is not full. So an outage's backlog drains fast, and a
	// fresh change does not wait long behind it or behind a held batch.
	// Default 8.
	MaxReceivers int
	// WaitTime is the long-polling wait of each receive (POLLER_WAIT_TIME,
	// 1-20 s). A stop signal lets the receives in flight end, so that the
	// messages they bring are handed back rather than left hidden: stopping
	// takes up to this long, plus the batches in flight. Default 20 s.
	WaitTime time.Duration
	// MaxMessages is the most messages one receive asks for, and so one
	// batch holds (POLLER_MAX_MESSAGES, 1-10). Default 10, SQS's most and
	// the cheapest (bench/README.md, "Cost").
	MaxMessages int32
	// VisibilityTimeout is how long received messages stay hidden; while a
	// batch runs it is extended by as much every half of it. Default 30 s:
	// it bounds only how long the messages of a task that died stay
	// hidden.
	VisibilityTimeout time.Duration
	// BatchTimeout bounds one batch's processing. Default 60 s
	// (defaultBatchTimeout).
	BatchTimeout time.Duration
	// HealthAddr serves GET /healthz (HEALTH_ADDR, "off" turns it off).
	// Default ":8080"; empty in Options means off.
	HealthAddr string
	// StatsEvery is how often a line of the process's goroutines and memory
	// is logged; negative: never. Default a minute: a poller runs for
	// weeks, and a leak shows over hours.
	StatsEvery time.Duration
	// Backoff is the first pause after SQS fails, doubled up to
	// MaxBackoff, with jitter (wait.Backoff). Defaults 200 ms and 20 s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// defaultBatchTimeout bounds a batch: stopping, a task waits out its long
// poll (up to 20 s), then the batches in flight and their deletes and
// hand-backs (10 s each), all within ECS's stopTimeout, 120 s at most on
// Fargate (template.yaml's, which template_poller_test.go checks).
const defaultBatchTimeout = 60 * time.Second

// OptionsFromEnv reads the poller's variables through getenv; the rest of
// Options are their defaults.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{QueueURL: env.String(getenv, "QUEUE_URL"), HealthAddr: healthAddr(getenv)}
	if o.QueueURL == "" {
		return o, errors.New("QUEUE_URL is required: the URL of the queue to consume")
	}
	most, err := env.Int(getenv, "POLLER_MAX_MESSAGES", 10, 1, 10)
	if err != nil {
		return o, err
	}
	o.MaxMessages = int32(most)
	if o.WaitTime, err = env.Duration(getenv, "POLLER_WAIT_TIME", 20*time.Second, time.Second, 20*time.Second); err != nil {
		return o, err
	}
	o.defaults()
	return o, nil
}

func (o *Options) defaults() {
	if o.Receivers <= 0 {
		o.Receivers = 2
	}
	if o.Region == "" {
		o.Region = "us-east-1"
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
		o.BatchTimeout = defaultBatchTimeout
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
