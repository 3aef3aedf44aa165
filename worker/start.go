package worker

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// announceHeartbeat is how often the worker looks whether a confirmation
// of its last announcement is due on ANNOUNCE_CHANNEL (1, 2, 4 … 32 s
// after it, then it is quiet), which shows the local tiers an
// announcement of its they missed: the second of a service process's own
// (writethrough/near's ChannelOptions.Heartbeat).
const announceHeartbeat = time.Second

// Start builds, once per process, the logger and the Worker named name,
// and starts connecting to the cache in the background: the process
// starts, and answers, whether or not the cache can be reached — records
// fail for now until it can. With IAM authentication the caller has filled
// in cfg.Cache.IAM's Region and Credentials. client parks in the failure
// queue, when there is one, hands failed SQS messages back and sends to
// the delay and window queues. A
// configuration that can never connect (an unreadable CACHE_CA_FILE, IAM
// without credentials, a password's secret that cannot give it) is an
// error. Close the Worker when done.
func Start(name string, cfg Config, client queues.SQS) (*Worker, error) {
	logger := NewLogger(os.Stdout, cfg.LogLevel).With("function", name)
	slog.SetDefault(logger)
	opt, err := cfg.Cache.ClientOption()
	if err != nil {
		return nil, err
	}
	if err := checkSecretAtStart(cfg.Cache.PasswordSecret); err != nil {
		return nil, err
	}
	tune(&opt)
	if patterns, derived := cfg.Rules.AllowedKeys(); derived {
		logger.Info("the rules name no allowedKeys: only keys matching the templates' literal prefixes are deleted; give the cache user the same patterns",
			"allowed_keys", patterns)
	} else {
		logger.Info("allowed keys", "allowed_keys", patterns)
	}
	// The metrics' namespace and how long a batch retries its keys are
	// Options' defaults: "Invalidator", which the template's alarms and
	// dashboards name, and RetryFor's 1 s.
	opts := Options{Name: name, Logger: logger, Queues: client}
	signs := newSigns()
	opt.DialCtxFn = noteConnections(signs)
	conn := newConnection(cfg.Cache, opt, logger, signs)
	if cfg.FailureQueueURL != "" {
		opts.Park = failurequeue.Queue{Client: client, URL: cfg.FailureQueueURL}
	} else {
		logger.Warn("no FAILURE_QUEUE_URL: records that fail for good are handed back to their source, to be retried until its DLQ or on-failure destination takes them")
	}
	opts.SecondDelete, opts.Window = cfg.Again(client)
	if opts.SecondDelete == nil && cfg.deletesAgain() {
		logger.Warn("no SECOND_DELETE_QUEUE_URL: keys are deleted once, and a fill that read the source before a change, or a failover, may undo it")
	}
	if opts.Window == nil {
		logger.Warn("no FAILOVER_WINDOW_QUEUE_URL: the deletes a failover loses are done again by the failover schedule only, FAILOVER_REDELETE_AFTER after them")
	}
	var beat *heartbeat
	if cfg.AnnounceChannel != "" {
		opts.Announce = announce.NewPublisher(conn, cfg.AnnounceChannel)
		beat = startHeartbeat(opts.Announce, cfg.AnnounceChannel, announceHeartbeat, logger)
	}
	w := New(invalidate.New(conn, cfg.invalidateOptions(conn.budget(cfg.ECPUPerSecond), logger)), opts)
	w.conn, w.heartbeat, w.signs = conn, beat, signs
	return w, nil
}

// Again is what c deletes again after each delete, sending with client:
// the second delete and the failover schedule through the delay queue, and
// the failover window; nil each when off or without its queue. Start gives
// them to its Worker, invalidator replay to its own.
func (c Config) Again(client queues.SQS) (SecondDeleter, *Window) {
	var again SecondDeleter
	var window *Window
	if c.SecondDeleteQueueURL != "" && c.deletesAgain() {
		again = delayQueue{Client: client, URL: c.SecondDeleteQueueURL, Delay: c.SecondDeleteDelay,
			FailoverAfter: c.FailoverRedeleteAfter, MaxBytes: DefaultDelayMaxBytes}
	}
	if c.FailoverWindowQueueURL != "" {
		window = &Window{Client: client, URLs: c.windowSlots(), MaxBytes: DefaultDelayMaxBytes}
	}
	return again, window
}

// tune fits valkey-go's options to the worker, which only deletes: their
// defaults cost cold start (bench/README.md, "Cold start").
func tune(opt *valkey.ClientOption) {
	// Its commands and replies are small: a chunk of 500 UNLINKs is about
	// 25 KiB, and valkey-go's 0.5 MiB buffers are zeroed at connect.
	opt.ReadBufferEachConn, opt.WriteBufferEachConn = 64<<10, 64<<10
	// A ring slot holds one Do or DoMulti in flight on a connection; a
	// Lambda function has at most invalidate.Options.Parallel of them, the
	// poller that many per receiver, and a full ring only makes the next
	// call wait. The default 1,024 slots are each a mutex, two conditions
	// and a channel, made at connect.
	opt.RingScaleEachConn = 4
	// While a slot migrates a command may bounce between its two nodes
	// (MOVED, ASK); past a few redirects the key fails for now, and the
	// invalidator tries it again after a backoff instead of spinning.
	opt.ClusterOption.MaxMovedRedirections = 8
	// Its calls share a connection a node, and some are bounded tighter
	// than a delete's attempt (a probe's or a heartbeat's second). On a
	// connection that has had one call at a time, valkey-go sets a call's
	// deadline on the connection itself, and a stalled node then fails the
	// calls queued behind it at that deadline: pipelined, each call's
	// deadline ends only that call.
	opt.AlwaysPipelining = true
}

// Connect waits, until ctx ends, for the attempt to connect in flight.
// A function made ahead of its first event calls it at init, so that the
// slow part of a cold start is over before the environment may be frozen.
func (w *Worker) Connect(ctx context.Context) error {
	if w.conn == nil {
		return nil
	}
	_, err := w.conn.get(ctx)
	return err
}

// Probe tells whether the cache answers at all: nil as soon as one of its
// nodes does. The poller asks it before it stops receiving, and while it
// waits for the cache. Without a connection of its own (a cache given to
// New) it deletes a key no change plans, and an answer of any kind — even
// a refusal — is the cache answering.
func (w *Worker) Probe(ctx context.Context) error {
	if w.conn != nil {
		return w.conn.ping(ctx)
	}
	rep := w.inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{{ID: "probe",
		Changes: []events.Change{{Keys: []string{"cache:invalidator-probe"}}}}}))
	if res := rep.Results[0]; res.Transient {
		return res.Err
	}
	return nil
}
