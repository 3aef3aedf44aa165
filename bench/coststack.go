package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/esm"
)

// The settings the cost group runs the functions with: template.yaml's
// memory size, and, deleting again, a second delete one second later and
// the failover schedule's two (the template's defaults are 2 s and 60 s;
// the delays change no count, only how long a cell takes), with the
// failover window.
const (
	memoryMB      = 256
	secondDelay   = "1s"
	failoverDelay = "2s"
)

// costStack is the local stack the cost group measures on: moto, on which
// it makes its own queues and tables, and the cache.
type costStack struct {
	aws                    aws.Config
	endpoint               string      // moto
	sqs                    *sqs.Client // the harness's own, uncounted
	db                     *dynamodb.Client
	cache                  valkey.Client
	bin, naive             string       // the built functions; the naive function's bootstrap
	queue, again, failures string       // the cell's queue and delay queue, and the failure queue
	window                 string       // the cell's failover window
	tables                 []string     // the stream cells' tables
	next                   int          // the first change ID of the next cell: every key is new
	warnings               *slog.Logger // the mappings': a cell that went wrong says why
}

func newCostStack(ctx context.Context, cache valkey.Client, bin, naive string) *costStack {
	s := &costStack{cache: cache, bin: bin, naive: naive, warnings: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if s.endpoint = os.Getenv("AWS_ENDPOINT_URL"); s.endpoint == "" {
		log.Fatal("cost: AWS_ENDPOINT_URL is not set: the cost group needs moto (make bench starts it; or localstack/up.sh, then . localstack/env.sh)")
	}
	var err error
	if s.aws, err = config.LoadDefaultConfig(ctx); err != nil {
		log.Fatal(err)
	}
	s.sqs = sqs.NewFromConfig(s.aws)
	// moto's CRC32 of a response is at times wrong, and the SDK would
	// retry a BatchWriteItem that succeeded: a cell with changes twice.
	s.db = dynamodb.NewFromConfig(s.aws, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	s.failures = s.newQueue(ctx, "cost-failures")
	return s
}

// functionEnv is a function's environment: the cache, template.yaml's
// memory size, deleting again on (second delete, failover schedule and
// window) or off, and SQS through its own counter.
func (s *costStack) functionEnv(own *apiCounter, again bool) []string {
	cfg, _ := elasticache.ConfigFromEnv(os.Getenv)
	delay, failover, window := "0s", "0s", ""
	if again {
		delay, failover, window = secondDelay, failoverDelay, s.window
	}
	return append(cfg.Env(), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(memoryMB),
		"AWS_ENDPOINT_URL="+own.URL, "AWS_ENDPOINT_URL_SQS="+own.URL, "SECOND_DELETE_DELAY="+delay, "FAILOVER_REDELETE_AFTER="+failover,
		"FAILOVER_WINDOW_QUEUE_URL="+window, "SECOND_DELETE_QUEUE_URL="+s.again, "FAILURE_QUEUE_URL="+s.failures)
}

// counted returns a new counter in front of moto.
func (s *costStack) counted() *apiCounter {
	c, err := newAPICounter(s.endpoint)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// sqsVia is an SQS client whose requests go through counter.
func (s *costStack) sqsVia(counter *apiCounter) *sqs.Client {
	return sqs.NewFromConfig(s.aws, func(o *sqs.Options) { o.BaseEndpoint = aws.String(counter.URL) })
}

// freshQueues gives a cell queues of its own, and deletes the last cell's:
// a long poll that a stopped mapping or poller left waiting in moto would
// otherwise take a message of the next cell and hide it for the queue's
// visibility timeout.
func (s *costStack) freshQueues(ctx context.Context, c cell) {
	s.deleteQueues(ctx, s.queue, s.again, s.window)
	name := "cost-" + strings.ReplaceAll(c.name(), "_", "-") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s.queue, s.again, s.window = s.newQueue(ctx, name), s.newQueue(ctx, name+"-again"), s.newQueue(ctx, name+"-window")
}

func (s *costStack) deleteQueues(ctx context.Context, urls ...string) {
	for _, q := range urls {
		if q == "" {
			continue
		}
		if _, err := s.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q)}); err != nil {
			log.Fatalf("cost: delete %s: %v", q, err)
		}
	}
}

// close deletes what the cells made.
func (s *costStack) close(ctx context.Context) {
	s.deleteQueues(ctx, s.queue, s.again, s.window, s.failures)
	for _, t := range s.tables {
		if _, err := s.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)}); err != nil {
			log.Fatalf("cost: delete table %s: %v", t, err)
		}
	}
}

// newQueue makes a queue with the local stack's visibility timeout.
func (s *costStack) newQueue(ctx context.Context, name string) string {
	out, err := s.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{"VisibilityTimeout": "180"}})
	if err != nil {
		log.Fatalf("cost: create queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// feed sends n change messages to the cell's queue, ten per request, from
// the stack's next change ID, while fewer than backlog wait unreceived:
// moto's receive scans the whole queue, so a deep one would slow every
// receive, as SQS's does not. received tells how many its consumer got.
func (s *costStack) feed(ctx context.Context, n, backlog int, received *apiCounter) {
	for sent := 0; sent < n; {
		if sent-received.counts().Received[s.queue] >= backlog {
			time.Sleep(time.Millisecond)
			continue
		}
		msgs := snsMessages(s.next+sent, min(10, n-sent))
		entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
		for i, m := range msgs {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.Body)}
		}
		if _, err := s.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.queue), Entries: entries}); err != nil {
			log.Fatalf("cost: feed %s: %v", s.queue, err)
		}
		sent += len(msgs)
	}
	s.next += n
}

// unlinks returns the UNLINK commands every node of the cache has run.
func (s *costStack) unlinks(ctx context.Context) int {
	total := 0
	for addr, node := range s.cache.Nodes() {
		info, err := node.Do(ctx, node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			log.Fatalf("INFO commandstats on %s: %v", addr, err)
		}
		_, calls, _ := strings.Cut(info, "cmdstat_unlink:calls=")
		calls, _, _ = strings.Cut(calls, ",")
		n, _ := strconv.Atoi(calls)
		total += n
	}
	return total
}

// emptySQSEvent warms a function up without touching a key or a queue.
var emptySQSEvent = lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{}}

// lambdaRun is a function under the emulator fed by an event source
// mapping, each with its own counted way to moto: what the mapping asks
// is what Lambda's pollers ask for you in AWS, billed to you as well.
type lambdaRun struct {
	fn                *meter
	mapping, function *apiCounter
	cancel            context.CancelFunc
	done              chan error
}

// startLambda starts bootstrap, warms it up and returns it, not yet fed.
func (s *costStack) startLambda(bootstrap string, env func(own *apiCounter) []string) *lambdaRun {
	r := &lambdaRun{mapping: s.counted(), function: s.counted(), done: make(chan error, 1)}
	var err error
	if r.fn, err = startMeter(bootstrap, env(r.function), r.function, emptySQSEvent); err != nil {
		log.Fatal(err)
	}
	return r
}

// sqsLambda runs the SQS function on queue with a mapping of batch
// messages (above 10, with a batching window, as Lambda requires).
func (s *costStack) sqsLambda(ctx context.Context, queue string, batch int, second bool) *lambdaRun {
	r := s.startLambda(s.bin+"/sqs-invalidate/bootstrap", func(own *apiCounter) []string { return s.functionEnv(own, second) })
	r.run(ctx, s.sqsMapping(r, queue, batch))
	return r
}

func (s *costStack) sqsMapping(r *lambdaRun, queue string, batch int) *esm.SQSMapping {
	m := &esm.SQSMapping{Client: s.sqsVia(r.mapping), QueueURL: queue, Functions: []esm.Invoker{r.fn}, BatchSize: int32(batch), Logger: s.warnings}
	if batch > 10 {
		// Lambda asks for a window of 1 s or more; moto's receives of a
		// backlog of 100 take 40 ms each, not SQS's 10-20, and a window
		// of 1 s would end batches before they are full.
		m.BatchingWindow = 10 * time.Second
	}
	return m
}

// run starts the mapping m, counting from now.
func (r *lambdaRun) run(ctx context.Context, m interface{ Run(context.Context) error }) {
	ctx, r.cancel = context.WithCancel(ctx)
	go func() { r.done <- m.Run(ctx) }()
}

// stop stops the mapping and the function and returns what the function
// used.
func (r *lambdaRun) stop() ([]invokeUse, batchSums, int) {
	if r.cancel != nil {
		r.cancel()
		if err := <-r.done; err != nil {
			log.Fatalf("mapping: %v", err)
		}
	}
	defer r.mapping.Close()
	defer r.function.Close()
	return r.fn.finish()
}

// waitFor polls done until it holds, and stops the bench when it does not
// within timeout: a cell that cannot finish counts nothing.
func waitFor(what string, timeout time.Duration, done func() bool) {
	for deadline := time.Now().Add(timeout); !done(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatalf("cost: gave up waiting for %s after %v", what, timeout)
		}
	}
}
