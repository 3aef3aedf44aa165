package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/writethrough"
)

// The paths a change takes, by the function that invalidates it there.
const (
	pathStream = "stream-invalidate"  // a Products write, through the table's stream
	pathPoller = "poller"             // an SNS publish, through cache-invalidation
	pathSQS    = "sqs-invalidate"     // the same publish, through cache-invalidation-raw
	pathCDC    = "kinesis-invalidate" // an orders row in PostgreSQL, through its commit log: the slot, the stand-in, Kinesis
)

// paths are every path, in the order the run's lines print them.
var paths = []string{pathStream, pathPoller, pathSQS, pathCDC}

// pathName is a path's name in the run's lines: its function's, less
// -invalidate; the commit log's, cdc.
func pathName(path string) string {
	if path == pathCDC {
		return "cdc"
	}
	return strings.TrimSuffix(path, "-invalidate")
}

const entities = 40 // products and users each

// item is what the readers cache: an entity at a version.
type item struct {
	ID      string
	Version int64
}

// change is one write, to be invalidated on each of its paths.
type change struct {
	marker   string // the key only this change plans
	paths    []string
	at       time.Time // the write began
	answered time.Time // the source answered it
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

	prefix string  // of every ID the load writes and reads
	poison bool    // one write in a hundred is poison
	rate   float64 // changes a second of each kind, product and user; 0: about three

	readWithin time.Duration // a read's deadline; 0: 3 s

	products, users, replicas *writethrough.Cache[item]
	listCache                 *writethrough.Cache[list]
	lists                     []listDef

	mu       sync.Mutex
	versions map[string]int64   // "product:p-1" and "user:u-1" → the source's version
	history  map[string][]stamp // the same, each version since when, for the replica
	changes  []change
	poisons  []poisoned

	writes, reads, readErrors, probes atomic.Int64
	wt                                wtReads
	near                              *nearReaders // readers through local tiers; nil: none
	big                               *bigRecord   // the budget-exceeded fault's; nil: none

	writers, readers  sync.WaitGroup
	stopW, stopR      context.CancelFunc
	writeCtx, readCtx context.Context
}

// stamp is a version of an entity, when the source took it, and when its
// write was done.
type stamp struct {
	at, done time.Time
	version  int64
}

// newLoad prepares a load whose IDs begin with prefix, poison among its
// writes or not.
func newLoad(ctx context.Context, e env, prefix string, poison bool) (*load, error) {
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
		prefix: prefix, poison: poison, products: writethrough.New[item](cache, opts), users: writethrough.New[item](cache, opts),
		replicas: writethrough.New[item](cache, opts), versions: map[string]int64{}, history: map[string][]stamp{},
		listCache: writethrough.New[list](cache, writethrough.Options[list]{TTL: time.Hour, TagsOf: listTags})}
	l.lists = l.listDefs()
	for i := range entities {
		id := l.id("product", i)
		if err := l.putProduct(ctx, id, 1, true); err != nil {
			return nil, err
		}
		l.record("product", id, 1, time.Time{})
		l.record("user", l.id("user", i), 1, time.Time{})
		if err := l.env.sql(ctx, upsertOrder(l.id("order", i), 1)); err != nil {
			return nil, fmt.Errorf("the orders table: %w", err)
		}
		l.record("order", l.id("order", i), 1, time.Time{})
	}
	return l, nil
}

// id is the ID of the n-th entity of a kind: p-1, u-1 for users, o-1 for
// orders.
func (l *load) id(entity string, n int) string { return l.prefix + entity[:1] + "-" + strconv.Itoa(n) }

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
// and readers of both entities, cache-aside through writethrough, through
// the usual recipe, and through writethrough reading a lagging replica,
// and readers of lists of them through writethrough with tags.
func (l *load) start(ctx context.Context) {
	l.writeCtx, l.stopW = context.WithCancel(ctx)
	l.readCtx, l.stopR = context.WithCancel(ctx)
	l.startWriters()
	for range 3 {
		l.readers.Go(func() { l.read(l.readCtx, "product", l.cachedProduct) })
		l.readers.Go(func() { l.read(l.readCtx, "user", l.cachedRecorded("user")) })
		l.readers.Go(func() { l.read(l.readCtx, "product", l.naiveProduct) })
		l.readers.Go(func() { l.read(l.readCtx, "user", l.naiveRecorded("user")) })
		l.readers.Go(func() { l.read(l.readCtx, "product", l.replicaRead("product")) })
		l.readers.Go(func() { l.read(l.readCtx, "user", l.replicaRead("user")) })
		l.readers.Go(func() { l.readLists(l.readCtx) })
	}
	// Orders, fewer: their path is one, not two.
	l.readers.Go(func() { l.read(l.readCtx, "order", l.cachedRecorded("order")) })
	l.readers.Go(func() { l.read(l.readCtx, "order", l.naiveRecorded("order")) })
	l.readers.Go(func() { l.read(l.readCtx, "order", l.replicaRead("order")) })
	if l.near != nil {
		l.near.readers(l)
	}
}

// startWriters starts the writers of the load's rate, under writeCtx. A
// writer waits for each write's answer: faster rates take several.
func (l *load) startWriters() {
	for range max(1, int(math.Ceil(l.rate/40))) {
		l.writers.Go(func() { l.write(l.writeCtx, l.writeProduct) })
		l.writers.Go(func() { l.write(l.writeCtx, l.writeUser) })
		l.writers.Go(func() { l.write(l.writeCtx, l.writeOrder) })
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
	next := time.Now()
	for n := 0; ctx.Err() == nil; n++ {
		poison := -1
		if l.poison && n%100 == 50 {
			poison = n / 100
		}
		if err := one(ctx, poison); err == nil {
			l.writes.Add(1)
		}
		// Paced from when each write was due, not from its answer, so that
		// the rate is the load's however long moto takes; a writer more
		// than a second behind starts again from now rather than bursting.
		next = next.Add(l.pause())
		if time.Since(next) > time.Second {
			next = time.Now()
		}
		wait.For(ctx, time.Until(next))
	}
}

// pause is a writer's wait between writes: about a third of a second, or
// what makes the load's rate with its writers.
func (l *load) pause() time.Duration {
	if l.rate <= 0 {
		return 250*time.Millisecond + rand.N(150*time.Millisecond)
	}
	every := time.Duration(float64(time.Second) * math.Ceil(l.rate/40) / l.rate)
	return every/2 + rand.N(every)
}

func (l *load) next(entity, id string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.versions[entity+":"+id] + 1
}

// record notes that the source holds version of an entity since at, the
// start of its write: what moto takes to answer is no replica lag.
func (l *load) record(entity, id string, version int64, at time.Time) {
	l.begin(entity, id, version, at)
	l.finish(entity, id, version)
}

// pending is the done of a write not answered yet.
var pending = time.Unix(1<<40, 0)

// begin notes a write of version that began at, before it is sent: the
// replica may read it from then on. Noted only once moto answers, a write
// its stream had carried to the worker, and both deletes done, seconds
// before (a loaded machine), left the replica behind by that long.
func (l *load) begin(entity, id string, version int64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.history[entity+":"+id]) == 0 {
		at = time.Time{} // the first version, since always
	}
	l.versions[entity+":"+id] = version
	l.history[entity+":"+id] = append(l.history[entity+":"+id], stamp{at: at, done: pending, version: version})
}

// finish notes that the write of version was answered, failed or not: the
// source may hold it.
func (l *load) finish(entity, id string, version int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.history[entity+":"+id]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].version == version {
			h[i].done = time.Now()
			return
		}
	}
}

// wrote notes a change written, to be invalidated.
func (l *load) wrote(c change) {
	l.mu.Lock()
	defer l.mu.Unlock()
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
	id := l.id("product", rand.N(entities))
	v := l.next("product", id)
	at := time.Now() // lag counts from the start of the write: moto may answer late
	l.begin("product", id, v, at)
	// A write that failed, or was cut short when the writers stopped, may
	// have reached the table or not: it insists, as writeUser does, so
	// that what the source holds is known.
	for l.putProduct(context.WithoutCancel(ctx), id, v, true) != nil {
		time.Sleep(200 * time.Millisecond)
	}
	answered := time.Now()
	l.finish("product", id, v)
	l.wrote(change{marker: "e2e:mark:product:" + id + ":" + strconv.FormatInt(v, 10), paths: []string{pathStream}, at: at, answered: answered})
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
	id := l.id("user", rand.N(entities))
	v := l.next("user", id)
	at := time.Now()
	l.record("user", id, v, at) // the write, before its event
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
	l.wrote(change{marker: "e2e:mark:user:" + id + ":" + strconv.FormatInt(v, 10), paths: []string{pathPoller, pathSQS}, at: at, answered: time.Now()})
	return nil
}

// writeOrder changes an order in PostgreSQL; the Kinesis function hears of
// it from the commit log. No poison on this path: the hostile suite sends
// the Kinesis function its bad records.
func (l *load) writeOrder(ctx context.Context, _ int) error {
	id := l.id("order", rand.N(entities))
	v := l.next("order", id)
	at := time.Now()
	l.begin("order", id, v, at)
	// Committed, the change is in the log; a write that failed may have
	// committed: it insists, as writeUser does.
	for {
		err := l.env.sql(context.WithoutCancel(ctx), upsertOrder(id, v))
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	answered := time.Now()
	l.finish("order", id, v)
	l.wrote(change{marker: "e2e:mark:order:" + id + ":" + strconv.FormatInt(v, 10), paths: []string{pathCDC}, at: at, answered: answered})
	return nil
}

func upsertOrder(id string, version int64) string {
	return "INSERT INTO orders VALUES ('" + id + "', " + strconv.FormatInt(version, 10) + ") ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version"
}

// sql runs a statement in the stack's PostgreSQL, in its own transaction.
func (e env) sql(ctx context.Context, statement string) error {
	_, err := e.db.Exec(ctx, statement)
	return err
}
