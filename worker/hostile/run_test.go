package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/lambda"
	"github.com/invalidator-go/invalidator/worker/poller"
)

// frontEnds are the ways records reach the worker, in the order a row
// runs through them.
var frontEnds = []string{"sqs-function", "sns-function", "stream-function", "kinesis-function", "kafka-function", "poller"}

// timeout is each invoke's, the template's FunctionTimeout: a front end
// answers before it. Batches are as the template's event sources make
// them, and no larger than a Lambda payload (6 MB).
const (
	timeout         = 30 * time.Second
	maxPayload      = 6 << 20
	sqsBatch        = 10
	streamBatch     = 1000
	defaultRetained = 64 << 20
)

// outcome is what one run of a row through one front end came to: each
// record's fate, what was measured, and what went wrong on the way.
type outcome struct {
	FrontEnd string `json:"frontEnd"`
	Skipped  string `json:"skipped,omitempty"`
	Killed   string `json:"killed,omitempty"`
	Err      string `json:"err,omitempty"`     // the harness could not run it
	Refused  string `json:"refused,omitempty"` // the worker refused its rules at start-up
	// Records are the row's, then the ordinary record.
	Records    []record      `json:"records,omitempty"`
	Invokes    int           `json:"invokes,omitempty"`
	InputBytes int           `json:"inputBytes,omitempty"`
	CacheBytes int           `json:"cacheBytes,omitempty"` // what the row put in the cache
	CPU        time.Duration `json:"cpu,omitempty"`
	Wall       time.Duration `json:"wall,omitempty"`
	Allocated  uint64        `json:"allocated,omitempty"`
	Retained   int64         `json:"retained,omitempty"`
	// Violations are the calls to SQS and the cache over an AWS limit.
	Violations []string `json:"violations,omitempty"`
	// Touched are the keys the row keeps that were sent to the cache;
	// Present the keys to delete that are still there; Gone the keys to
	// keep that are not.
	Touched []string `json:"touched,omitempty"`
	Present []string `json:"present,omitempty"`
	Gone    []string `json:"gone,omitempty"`
	// Parked counts the messages sent to the failure queue.
	Parked int `json:"parked,omitempty"`
	// Unnamed are the records the worker failed under a name that is
	// none of the batch's.
	Unnamed []string `json:"unnamed,omitempty"`
}

// record is a record's fate, and its reason when it failed.
type record struct {
	ID     string `json:"id"`
	Good   bool   `json:"good,omitempty"`
	Fate   fate   `json:"fate"`
	Reason string `json:"reason,omitempty"`
}

// input is one record as its front end gets it: a message body, or a
// stream record.
type input struct {
	id   string
	raw  string
	good bool
}

// inputs are the row's records for front end fe, and the ordinary one
// after them, whose key is goodKey.
func (r *row) inputs(fe, ns string) (in []input, goodKey string) {
	goodBody, goodKey := `{"entity":"good","id":"`+ns+`"}`, "cache:good:"+ns
	if r.good != nil {
		if body, key, _ := r.good(ns); body != "" {
			goodBody, goodKey = body, key
		}
	}
	if fe == "stream-function" {
		for i, c := range r.records(ns) {
			seq := fmt.Sprintf("%021d", (i+1)*100)
			in = append(in, input{id: seq, raw: streamRecord(seq, c)})
		}
		seq := fmt.Sprintf("%021d", (len(in)+1)*100)
		return append(in, input{id: seq, raw: streamRecord(seq, modify(ns+"good", "labels", attrSS([]string{ns + "good"}))), good: true}),
			"cache:product:" + ns + "good"
	}
	if fe == "kinesis-function" || fe == "kafka-function" { // the messages as a commit log's reader or a producer puts them on a stream or topic
		for i, body := range append(r.messages(ns), goodBody) {
			seq := fmt.Sprintf("%021d", (i+1)*100)
			if fe == "kafka-function" {
				in = append(in, input{id: "hostile-0@" + strconv.Itoa(i), raw: kafkaRecord(i, body)})
				continue
			}
			in = append(in, input{id: seq, raw: kinesisRecord(seq, body)})
		}
		in[len(in)-1].good = true
		return in, goodKey
	}
	for i, body := range r.messages(ns) {
		in = append(in, input{id: "m" + strconv.Itoa(i), raw: body})
	}
	return append(in, input{id: "good", raw: goodBody, good: true}), goodKey
}

// skipped says why the row does not run through fe on stage, if it does
// not.
func (r *row) skipped(stage, fe string) string {
	for _, k := range []string{stage + "/" + fe, fe} {
		if why := r.skip[k]; why != "" {
			return why
		}
	}
	switch {
	case fe == "stream-function" && r.records == nil:
		return "the row has no stream form"
	case fe != "stream-function" && r.messages == nil:
		return "the row has no message form"
	case fe != "stream-function" && r.skip["messages"] != "":
		return r.skip["messages"]
	}
	return ""
}

// runOne runs row r through front end fe on e, and measures it; arm
// starts a watchdog for the run once its inputs are made.
func runOne(t *testing.T, e func(ns string, watch []string) *env, r *row, fe string, arm func(time.Duration) (disarm func())) outcome {
	out := outcome{FrontEnd: fe}
	// The heap before the inputs are made: what the run retains is
	// measured from here, once they are dropped.
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	ns := namespace()
	tags := "cache:hostile:" + ns + ":tag:"
	in, goodKey := r.inputs(fe, ns)
	var kept, deleted []string
	if r.kept != nil {
		kept = r.kept(ns)
	}
	if r.deleted != nil {
		deleted = r.deleted(ns)
	}
	env := e(ns, kept)
	var facts []fact
	if r.cache != nil {
		facts = r.cache(ns, tags)
	}
	env.put(t, append(facts, fact{key: goodKey, kind: "string", values: []string{"v"}}))
	for _, f := range facts {
		out.CacheBytes += len(f.key)
		for _, v := range f.values {
			out.CacheBytes += len(v)
		}
	}
	rules := strings.ReplaceAll(cmpOr(r.rules, baseRules), "@TAGS@", tags)
	var logs bytes.Buffer
	w, err := newWorker(env, rules, r.vars, !slices.Contains(r.noSecondDelete, env.stage), fe, &logs)
	if err != nil {
		out.Refused = err.Error()
		return out
	}
	for _, i := range in {
		out.InputBytes += len(i.raw)
	}
	defer arm(20*time.Second + 3*cpuBound(out.InputBytes+out.CacheBytes, len(in)))()

	// What is allocated and spent from the payloads to the answers.
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu, start := cpuTime(), time.Now()
	var retried map[string]string
	names := map[string]string{} // the worker's name of a record → its input's, where they differ
	switch fe {
	case "sqs-function":
		retried, err = sqsFunction(w, env, in, &out)
	case "sns-function":
		retried, err = snsFunction(w, in, &out)
	case "stream-function":
		retried, err = streamFunction(w, in, &out, lambda.DynamoDB)
	case "kinesis-function":
		retried, err = streamFunction(w, in, &out, lambda.Kinesis)
	case "kafka-function":
		retried, err = kafkaFunction(w, in, &out)
	case "poller":
		retried, err = runPoller(w, env, in, names, &out)
	}
	out.Wall, out.CPU = time.Since(start), cpuTime()-cpu
	runtime.ReadMemStats(&after)
	out.Allocated = after.TotalAlloc - before.TotalAlloc
	if err != nil {
		out.Err = err.Error()
		return out
	}
	records := make([]record, len(in))
	for i := range in {
		records[i] = record{ID: in[i].id, Good: in[i].good, Fate: done}
	}
	in = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	out.Retained = int64(after.HeapAlloc) - int64(base.HeapAlloc)
	runtime.KeepAlive(w)

	failed := failedRecords(logs.Bytes(), names)
	for _, rec := range records {
		f := failed[rec.ID]
		delete(failed, rec.ID)
		switch how, ok := retried[rec.ID]; {
		case ok:
			rec.Fate, rec.Reason = retry, how
			if f.reason != "" && !strings.Contains(how, f.reason) {
				rec.Reason += "; the worker's reason: " + f.reason
			}
			if f.unparked != "" {
				rec.Reason += "; it could not be parked: " + f.unparked
			}
		case f.fate == "parked":
			rec.Fate, rec.Reason = parked, f.reason
		}
		out.Records = append(out.Records, rec)
	}
	for name, f := range failed {
		out.Unnamed = append(out.Unnamed, fmt.Sprintf("%q (%s: %s)", name, f.fate, truncate(f.reason)))
	}
	out.Violations = append(env.sqs.Violations(), env.cacheTrouble()...)
	out.Touched = env.touched()
	out.Present = env.present(t, deleted)
	if slices.ContainsFunc(out.Records, func(rec record) bool { return rec.Good && rec.Fate == done }) {
		out.Present = append(out.Present, env.present(t, []string{goodKey})...)
	}
	present := env.present(t, kept)
	for _, k := range kept {
		if !slices.Contains(present, k) {
			out.Gone = append(out.Gone, k)
		}
	}
	out.Parked = env.sqs.Sent(queueName(env.failure))
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// newWorker builds the worker as worker.Start does from its environment —
// the same rules, failure queue and second deletes, all
// at their defaults but for the row's vars — but for its cache: the run's, whose requests are
// counted. A configuration the worker would not start with is the error.
func newWorker(e *env, rules string, given map[string]string, secondDelete bool, name string, logs io.Writer) (*worker.Worker, error) {
	vars := map[string]string{"CACHE_ENDPOINT": e.cacheEndpoint, "INVALIDATION_RULES": rules, "FAILURE_QUEUE_URL": e.failure}
	maps.Copy(vars, given)
	if secondDelete {
		vars["SECOND_DELETE_QUEUE_URL"] = e.delay
	}
	cfg, err := worker.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		return nil, err
	}
	cache := e.cache
	opts := worker.Options{Name: name, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: io.Discard,
		Queues: e.sqs, Park: failurequeue.Queue{Client: e.sqs, URL: cfg.FailureQueueURL}}
	if cfg.SecondDeleteDelay > 0 {
		cfg.FailoverRedeleteAfter, cfg.FailoverWindowQueueURL = 0, "" // the second delete alone
		opts.SecondDelete, _ = cfg.Again(e.sqs)
	}
	return worker.New(invalidate.New(cache, invalidate.Options{Rules: cfg.Rules, ECPUPerSecond: cfg.ECPUPerSecond}), opts), nil
}

// failure is what the worker logged of a record that failed: its fate
// and reason, and why it could not be parked.
type failure struct{ fate, reason, unparked string }

// failedRecords are the worker's lines of failed records ("record
// failed", "cannot park a record"), by record, named as the inputs are.
func failedRecords(logs []byte, names map[string]string) map[string]failure {
	out := map[string]failure{}
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var line struct {
			Msg, Record, Fate, Error string
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		name := cmpOr(names[line.Record], line.Record)
		f := out[name]
		switch {
		case line.Msg == "record failed":
			f.fate, f.reason = line.Fate, line.Error
		case strings.HasPrefix(line.Msg, "cannot park a record"):
			f.unparked = line.Error
		default:
			continue
		}
		out[name] = f
	}
	return out
}

// cpuTime is the CPU the process has spent.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// chunks splits in into batches of at most most records and maxPayload
// bytes.
func chunks(in []input, most int) [][]input {
	var out [][]input
	start, size := 0, 0
	for i := range in {
		if i > start && (i-start == most || size+len(in[i].raw)+1024 > maxPayload) {
			out = append(out, in[start:i])
			start, size = i, 0
		}
		size += len(in[i].raw) + 1024
	}
	return append(out, in[start:])
}

func invoke(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return f(ctx)
}

// batchFailures reads a batch response as Lambda does: a list, never null,
// of item identifiers of the batch, none empty; an invalid one fails the
// whole batch.
func batchFailures(resp any, batch []input) ([]string, error) {
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	var r struct {
		BatchItemFailures *[]struct {
			ItemIdentifier *string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.BatchItemFailures == nil {
		return nil, fmt.Errorf("answer %s: not a batch response with its list", b)
	}
	var ids []string
	for _, f := range *r.BatchItemFailures {
		if f.ItemIdentifier == nil || !slices.ContainsFunc(batch, func(i input) bool { return i.id == *f.ItemIdentifier }) {
			return nil, fmt.Errorf("answer %s: an item identifier that is empty or not of the batch fails the whole batch", b)
		}
		ids = append(ids, *f.ItemIdentifier)
	}
	return ids, nil
}

// sqsFunction invokes the SQS function with the records, ten at a time.
func sqsFunction(w *worker.Worker, e *env, in []input, out *outcome) (map[string]string, error) {
	retry := map[string]string{}
	for _, batch := range chunks(in, sqsBatch) {
		ids, bodies := make([]string, len(batch)), make([]string, len(batch))
		for i := range batch {
			ids[i], bodies[i] = batch[i].id, batch[i].raw
		}
		payload := sqsPayload(e.mainARN, ids, bodies)
		var resp any
		err := invoke(func(ctx context.Context) (err error) { resp, err = lambda.SQS(w, ctx, payload); return err })
		out.Invokes++
		if err != nil {
			return nil, fmt.Errorf("the invoke failed: %w", err)
		}
		failed, err := batchFailures(resp, batch)
		if err != nil {
			return nil, err
		}
		for _, id := range failed {
			retry[id] = "handed back (batchItemFailures)"
		}
	}
	return retry, nil
}

// snsFunction invokes the SNS function once a message, as SNS does.
func snsFunction(w *worker.Worker, in []input, out *outcome) (map[string]string, error) {
	retry := map[string]string{}
	for _, i := range in {
		payload := snsPayload(i.id, i.raw)
		err := invoke(func(ctx context.Context) error { _, err := lambda.SNS(w, ctx, payload); return err })
		out.Invokes++
		var failed lambda.RecordsFailed
		switch {
		case errors.As(err, &failed):
			retry[i.id] = "the invoke failed, for SNS to retry it: " + truncate(err.Error())
		case err != nil:
			return nil, fmt.Errorf("the invoke failed: %w", err)
		}
	}
	return retry, nil
}

// streamFunction invokes the stream function with the records, in order;
// a shard is retried from its lowest record reported, and every record
// after it comes again.
// streamFunction runs a stream's front end, DynamoDB's or Kinesis's, a
// batch at a time, until one answers records to retry: the shard stops
// there.
func streamFunction[R any](w *worker.Worker, in []input, out *outcome, handle func(*worker.Worker, context.Context, []byte) (R, error)) (map[string]string, error) {
	retry := map[string]string{}
	for _, batch := range chunks(in, streamBatch) {
		raws := make([]string, len(batch))
		for i := range batch {
			raws[i] = batch[i].raw
		}
		payload := streamPayload(raws)
		var resp any
		err := invoke(func(ctx context.Context) (err error) { resp, err = handle(w, ctx, payload); return err })
		out.Invokes++
		if err != nil {
			return nil, fmt.Errorf("the invoke failed: %w", err)
		}
		failed, err := batchFailures(resp, batch)
		if err != nil {
			return nil, err
		}
		if len(failed) == 0 {
			continue
		}
		lowest := slices.Min(failed)
		for _, i := range batch {
			if i.id >= lowest {
				retry[i.id] = "retried from sequence number " + lowest + " (itemIdentifier)"
			}
		}
		return retry, nil // the shard stops there until it is retried
	}
	return retry, nil
}

// kafkaFunction runs the Kafka front end a batch at a time, until one
// fails: Lambda retries that batch whole, and its partition stops there.
func kafkaFunction(w *worker.Worker, in []input, out *outcome) (map[string]string, error) {
	retry := map[string]string{}
	for _, batch := range chunks(in, streamBatch) {
		raws := make([]string, len(batch))
		for i := range batch {
			raws[i] = batch[i].raw
		}
		payload := []byte(`{"eventSource":"aws:kafka","records":{"hostile-0":[` + strings.Join(raws, ",") + `]}}`)
		err := invoke(func(ctx context.Context) error { _, err := lambda.Kafka(w, ctx, payload); return err })
		out.Invokes++
		var failed lambda.RecordsFailed
		switch {
		case errors.As(err, &failed):
			for _, i := range batch {
				retry[i.id] = "the invoke failed, for Lambda to retry the batch: " + truncate(err.Error())
			}
			return retry, nil
		case err != nil:
			return nil, fmt.Errorf("the invoke failed: %w", err)
		}
	}
	return retry, nil
}

// runPoller sends the records to the poller's queue and runs it until
// each is deleted — done or parked — or one comes back to be received
// again, or the time is up.
func runPoller(w *worker.Worker, e *env, in []input, byMessage map[string]string, out *outcome) (map[string]string, error) {
	for _, i := range in {
		res, err := e.producer.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(e.main), MessageBody: aws.String(i.raw)})
		if err != nil {
			return nil, fmt.Errorf("send record %s to the poller's queue: %w", i.id, err)
		}
		byMessage[aws.ToString(res.MessageId)] = i.id
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		// A visibility of 5 s: a receive whose answer moto sent and the SDK
		// lost (it retried; moto had marked the messages in flight) costs
		// those messages 5 s, not the run's whole time.
		stopped <- poller.Run(ctx, e.sqs, w, poller.Options{QueueURL: e.main, Receivers: 1, MaxReceivers: 2, WaitTime: time.Second,
			VisibilityTimeout: 5 * time.Second, BatchTimeout: timeout, StatsEvery: -1, Logger: slog.New(slog.DiscardHandler)})
	}()
	retry := map[string]string{}
	deadline := time.Now().Add(2 * timeout)
	for {
		e.sqs.mu.Lock()
		deleted, again := 0, ""
		for msg := range byMessage {
			if e.sqs.deleted[msg] {
				deleted++
			}
			if e.sqs.received[msg] > 1 {
				again = msg
			}
		}
		e.sqs.mu.Unlock()
		if deleted == len(byMessage) || again != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-stopped; err != nil {
		return nil, err
	}
	out.Invokes = 1
	e.sqs.mu.Lock()
	defer e.sqs.mu.Unlock()
	for msg, id := range byMessage {
		switch {
		case e.sqs.received[msg] > 1:
			retry[id] = "handed back to the queue and received again"
		case !e.sqs.deleted[msg]:
			retry[id] = "not deleted: it comes back after its visibility timeout"
		}
	}
	return retry, nil
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
