package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/writethrough"
)

// The paths a change takes, by the function that invalidates it there.
const (
	pathStream = "stream-invalidate" // a Products write, through the table's stream
	pathPoller = "poller"            // an SNS publish, through cache-invalidation
	pathSQS    = "sqs-invalidate"    // the same publish, through cache-invalidation-raw
)

const entities = 40 // products and users each

// item is what the readers cache: an entity at a version.
type item struct {
	ID      string
	Version int64
}

// change is one write, to be invalidated on each of its paths.
type change struct {
	marker string // the key only this change plans
	paths  []string
	at     time.Time
}

// poisoned is one message that can never be decoded or planned, to be
// parked by each function on its way.
type poisoned struct {
	marker string
	paths  []string
}

// load is the run's writers and readers, and the source of truth they
// share.
type load struct {
	env   env
	cache valkey.Client
	db    *dynamodb.Client
	sns   *sns.Client
	sqs   *sqs.Client

	products, users *writethrough.Cache[item]

	mu       sync.Mutex
	versions map[string]int64 // "product:p-1" and "user:u-1" → the source's version
	changes  []change
	poisons  []poisoned

	writes, reads, readErrors, probes atomic.Int64

	writers, readers  sync.WaitGroup
	stopW, stopR      context.CancelFunc
	writeCtx, readCtx context.Context
}

func newLoad(ctx context.Context, e env) (*load, error) {
	aws, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	cache, err := elasticache.New(e.cache)
	if err != nil {
		return nil, err
	}
	opts := writethrough.Options[item]{TTL: time.Hour, VersionOf: func(v item) int64 { return v.Version }}
	l := &load{env: e, cache: cache, db: dynamodb.NewFromConfig(aws), sns: sns.NewFromConfig(aws), sqs: sqs.NewFromConfig(aws),
		products: writethrough.New[item](cache, opts), users: writethrough.New[item](cache, opts), versions: map[string]int64{}}
	for i := range entities {
		id := "p-" + strconv.Itoa(i)
		if err := l.putProduct(ctx, id, 1, true); err != nil {
			return nil, err
		}
		l.versions["product:"+id] = 1
		l.versions["user:u-"+strconv.Itoa(i)] = 1
	}
	return l, nil
}

func (l *load) putProduct(ctx context.Context, id string, version int64, category bool) error {
	it := map[string]ddbtypes.AttributeValue{
		"id": &ddbtypes.AttributeValueMemberS{Value: id}, "version": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}}
	if category {
		it["category"] = &ddbtypes.AttributeValueMemberS{Value: "cat-" + strconv.Itoa(len(id)%5)}
	}
	_, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.env.table), Item: it})
	return err
}

// start runs two writers (products through the stream, users through SNS)
// and readers of both entities, cache-aside through writethrough and
// through the usual recipe.
func (l *load) start(ctx context.Context) {
	l.writeCtx, l.stopW = context.WithCancel(ctx)
	l.readCtx, l.stopR = context.WithCancel(ctx)
	l.writers.Go(func() { l.write(l.writeCtx, l.writeProduct) })
	l.writers.Go(func() { l.write(l.writeCtx, l.writeUser) })
	for range 3 {
		l.readers.Go(func() { l.read(l.readCtx, "product", l.cachedProduct) })
		l.readers.Go(func() { l.read(l.readCtx, "user", l.cachedUser) })
		l.readers.Go(func() { l.read(l.readCtx, "product", l.naiveProduct) })
		l.readers.Go(func() { l.read(l.readCtx, "user", l.naiveUser) })
	}
}

func (l *load) stopWriters() { l.stopW(); l.writers.Wait() }

// stopReaders stops the readers and waits out their leases, so that the
// check finds no load in flight.
func (l *load) stopReaders() {
	l.stopR()
	l.readers.Wait()
	time.Sleep(3 * time.Second)
}

// write calls one about three times a second; one write in a hundred is
// poison instead, the n-th of its kinds. Faster, and the backlog of a 60 s
// outage outgrows what moto hands out within the 5 s recovery target: its
// ReceiveMessage costs grow with the queue's length (README, "The local
// stack").
func (l *load) write(ctx context.Context, one func(ctx context.Context, poison int) error) {
	for n := 0; ctx.Err() == nil; n++ {
		poison := -1
		if n%100 == 50 {
			poison = n / 100
		}
		if err := one(ctx, poison); err == nil {
			l.writes.Add(1)
		}
		sleep(ctx, 250*time.Millisecond+rand.N(150*time.Millisecond))
	}
}

func (l *load) next(entity, id string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.versions[entity+":"+id] + 1
}

func (l *load) wrote(entity, id string, version int64, c change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.versions[entity+":"+id] = version
	l.changes = append(l.changes, c)
}

func (l *load) poisoned(p poisoned) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.poisons = append(l.poisons, p)
}

func (l *load) poisonMarker() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "e2e-poison-" + strconv.Itoa(len(l.poisons))
}

// writeProduct updates a product in the table; its change reaches the
// stream function through the stream. Poison (poison >= 0): an item the
// rules cannot plan keys for (no category).
func (l *load) writeProduct(ctx context.Context, poison int) error {
	if poison >= 0 {
		marker := l.poisonMarker()
		if err := l.putProduct(ctx, marker, 1, false); err != nil {
			return err
		}
		l.poisoned(poisoned{marker: marker, paths: []string{pathStream}})
		return nil
	}
	id := "p-" + strconv.Itoa(rand.N(entities))
	v := l.next("product", id)
	at := time.Now() // lag counts from the start of the write: moto may answer late
	if err := l.putProduct(ctx, id, v, true); err != nil {
		return err
	}
	l.wrote("product", id, v, change{marker: "e2e:mark:product:" + id + ":" + strconv.FormatInt(v, 10), paths: []string{pathStream}, at: at})
	return nil
}

// writeUser changes a user in the source, then publishes the change on SNS,
// which delivers it to both queues. Poison (poison >= 0), its kinds in
// turn: on SNS (both queues), or straight into the raw queue.
func (l *load) writeUser(ctx context.Context, poison int) error {
	if poison >= 0 {
		marker := l.poisonMarker()
		kinds := []struct {
			body string
			raw  bool
		}{
			{marker + ": not JSON at all", false},
			{`{"id":"` + marker + `"}`, false}, // no entity
			{`{"entity":"user","id":"` + marker + `","op":"upsert"}`, false},
			{`{"entity":"user","id":"` + marker + `","version":"seven"}`, false},
			{`{"entity":"user","id":"` + marker + `"`, true},                             // broken JSON
			{`[{"entity":"user","id":"` + marker + `","version":1},{"entity":7}]`, true}, // one bad element
		}
		k := kinds[poison%len(kinds)]
		if k.raw {
			if _, err := l.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(l.env.rawQueue), MessageBody: aws.String(k.body)}); err != nil {
				return err
			}
			l.poisoned(poisoned{marker: marker, paths: []string{pathSQS}})
			return nil
		}
		if _, err := l.sns.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(l.env.topicARN), Message: aws.String(k.body)}); err != nil {
			return err
		}
		l.poisoned(poisoned{marker: marker, paths: []string{pathPoller, pathSQS}})
		return nil
	}
	id := "u-" + strconv.Itoa(rand.N(entities))
	v := l.next("user", id)
	l.mu.Lock()
	l.versions["user:"+id] = v // the write, before its event
	l.mu.Unlock()
	at := time.Now()
	msg, _ := json.Marshal(map[string]any{"entity": "user", "id": id, "version": v, "occurredAt": at.UTC().Format(time.RFC3339Nano)})
	// The source has changed: a producer that loses the event makes a stale
	// cache no invalidator can mend, so this one insists.
	for {
		_, err := l.sns.Publish(context.WithoutCancel(ctx), &sns.PublishInput{TopicArn: aws.String(l.env.topicARN), Message: aws.String(string(msg))})
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	l.wrote("user", id, v, change{marker: "e2e:mark:user:" + id + ":" + strconv.FormatInt(v, 10), paths: []string{pathPoller, pathSQS}, at: at})
	return nil
}

// read reads random keys of entity, one every 20-50 ms, each within 3 s,
// as a service's requests would.
func (l *load) read(ctx context.Context, entity string, get func(ctx context.Context, id string) error) {
	prefix := entity[:1] + "-"
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if err := get(rctx, prefix+strconv.Itoa(rand.N(entities))); err != nil && ctx.Err() == nil {
			l.readErrors.Add(1)
		}
		cancel()
		l.reads.Add(1)
		sleep(ctx, 20*time.Millisecond+rand.N(30*time.Millisecond))
	}
}

// slowly returns after a load time: mostly milliseconds, now and then over
// a second, as real loads are.
func slowly(ctx context.Context) {
	var d time.Duration
	switch p := rand.N(100); {
	case p < 80:
		d = time.Millisecond + rand.N(50*time.Millisecond)
	case p < 95:
		d = 100*time.Millisecond + rand.N(400*time.Millisecond)
	default:
		d = time.Second + rand.N(500*time.Millisecond)
	}
	sleep(ctx, d)
}

// sourceProduct reads a product from the table, strongly.
func (l *load) sourceProduct(ctx context.Context, id string) (item, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.env.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: id}}})
	if err != nil {
		return item{}, err
	}
	n, ok := out.Item["version"].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return item{}, fmt.Errorf("product %s has no version", id)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	return item{ID: id, Version: v}, err
}

func (l *load) sourceUser(id string) item {
	l.mu.Lock()
	defer l.mu.Unlock()
	return item{ID: id, Version: l.versions["user:"+id]}
}

func (l *load) loadProduct(id string) func(context.Context) (item, error) {
	return func(ctx context.Context) (item, error) {
		it, err := l.sourceProduct(ctx, id)
		slowly(ctx)
		return it, err
	}
}

func (l *load) loadUser(id string) func(context.Context) (item, error) {
	return func(ctx context.Context) (item, error) {
		it := l.sourceUser(id)
		slowly(ctx)
		return it, nil
	}
}

func (l *load) cachedProduct(ctx context.Context, id string) error {
	_, err := l.products.Get(ctx, "cache:product:"+id, l.loadProduct(id))
	return err
}

func (l *load) cachedUser(ctx context.Context, id string) error {
	_, err := l.users.Get(ctx, "cache:user:"+id, l.loadUser(id))
	return err
}

func (l *load) naiveProduct(ctx context.Context, id string) error {
	return l.naive(ctx, "naive:product:"+id, l.loadProduct(id))
}

func (l *load) naiveUser(ctx context.Context, id string) error {
	return l.naive(ctx, "naive:user:"+id, l.loadUser(id))
}

// naive is the usual cache-aside recipe: GET; on a miss read the source,
// then SET EX.
func (l *load) naive(ctx context.Context, key string, load func(context.Context) (item, error)) error {
	err := l.cache.Do(ctx, l.cache.B().Get().Key(key).Build()).Error()
	if !valkey.IsValkeyNil(err) {
		return err
	}
	it, err := load(ctx)
	if err != nil {
		return err
	}
	value, _ := json.Marshal(it)
	return l.cache.Do(ctx, l.cache.B().Set().Key(key).Value(string(value)).Ex(time.Hour).Build()).Error()
}

// probeResult is how long a path took to invalidate a fresh change sent
// right after a fault ended.
type probeResult struct {
	path string
	took time.Duration
	err  error
}

// probe sends a fresh change down each path at once, and times each until
// its key is gone.
func (l *load) probe(ctx context.Context, fault string) []probeResult {
	n := strconv.FormatInt(l.probes.Add(1), 10)
	paths := map[string]struct {
		key  string
		send func(ctx context.Context) error
	}{
		pathStream: {"cache:product:probe-" + n, func(ctx context.Context) error { return l.putProduct(ctx, "probe-"+n, 1, true) }},
		pathPoller: {"cache:probe:poller-" + n, func(ctx context.Context) error { return l.send(ctx, l.env.queueURL, "poller-"+n) }},
		pathSQS:    {"cache:probe:sqs-" + n, func(ctx context.Context) error { return l.send(ctx, l.env.rawQueue, "sqs-"+n) }},
	}
	results := make(chan probeResult, len(paths))
	for path, p := range paths {
		go func() {
			r := probeResult{path: path}
			r.took, r.err = l.timeInvalidation(ctx, p.key, p.send)
			results <- r
		}()
	}
	var out []probeResult
	for range paths {
		out = append(out, <-results)
	}
	return out
}

func (l *load) send(ctx context.Context, queue, id string) error {
	_, err := l.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(`{"entity":"probe","id":"` + id + `"}`)})
	return err
}

// timeInvalidation caches key, sends a change that invalidates it, and
// returns how long the key took to go, up to 30 s.
func (l *load) timeInvalidation(ctx context.Context, key string, send func(context.Context) error) (time.Duration, error) {
	for deadline := time.Now().Add(10 * time.Second); ; sleep(ctx, 50*time.Millisecond) {
		err := l.cache.Do(ctx, l.cache.B().Set().Key(key).Value("cached").Ex(time.Hour).Build()).Error()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("cannot cache the probe key: %w", err)
		}
	}
	start := time.Now()
	if err := send(ctx); err != nil {
		return 0, err
	}
	for time.Since(start) < 30*time.Second && ctx.Err() == nil {
		if n, err := l.cache.Do(ctx, l.cache.B().Exists().Key(key).Build()).AsInt64(); err == nil && n == 0 {
			return time.Since(start), nil
		}
		sleep(ctx, 20*time.Millisecond)
	}
	return time.Since(start), errors.New("not invalidated within 30 s")
}

// drain waits until both queues are empty and a change sent through the
// stream last is invalidated — the stream is done with all before it.
func (l *load) drain(ctx context.Context, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for _, q := range []string{l.env.queueURL, l.env.rawQueue} {
		for l.messages(ctx, q) != 0 {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
			sleep(ctx, 500*time.Millisecond)
		}
	}
	_, err := l.timeInvalidation(ctx, "cache:product:drained", func(ctx context.Context) error { return l.putProduct(ctx, "drained", 1, true) })
	return err == nil
}

// messages counts a queue's messages, visible or not, reading until two
// reads agree: moto counts the two kinds in separate passes.
func (l *load) messages(ctx context.Context, queue string) int {
	last := -1
	for range 10 {
		out, err := l.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return -1
		}
		visible, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		hidden, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		if n := visible + hidden; n == last {
			return n
		} else {
			last = n
		}
	}
	return last
}
