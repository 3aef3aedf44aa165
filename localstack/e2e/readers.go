package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// read reads random keys of entity, as readEach does.
func (l *load) read(ctx context.Context, entity string, get func(ctx context.Context, id string) error) {
	l.readEach(ctx, func(ctx context.Context) error { return get(ctx, l.id(entity, rand.N(entities))) })
}

// readEach calls get, one every 20-50 ms, each within l.readWithin (3 s
// unless set), as a service's requests would.
func (l *load) readEach(ctx context.Context, get func(ctx context.Context) error) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, cmp.Or(l.readWithin, 3*time.Second))
		if err := get(rctx); err != nil && ctx.Err() == nil {
			l.readErrors.Add(1)
		}
		cancel()
		l.reads.Add(1)
		wait.For(ctx, 20*time.Millisecond+rand.N(30*time.Millisecond))
	}
}

// slowly returns after a load time of 0.1 to 1.5 s, a slow service's: the
// longer a load, the likelier a change lands during it.
func slowly(ctx context.Context) {
	wait.For(ctx, 100*time.Millisecond+rand.N(1400*time.Millisecond))
}

// maxReplicaLag is how far behind the source the replica may be.
const maxReplicaLag = 500 * time.Millisecond

// replicaRead reads entities through writethrough, loading them from a
// replica of the source lagging up to maxReplicaLag, as DynamoDB's default
// GetItem or a read replica may: a load after an invalidation can still
// read the version before it.
func (l *load) replicaRead(entity string) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		return readThrough(ctx, &l.wt, kindReplica, l.replicas, "replica:"+entity+":"+id, func(ctx context.Context) (item, error) {
			it := l.replica(entity, id, time.Now().Add(-rand.N(maxReplicaLag)))
			slowly(ctx)
			return it, nil
		})
	}
}

// replica is the entity as the source held it at t.
func (l *load) replica(entity, id string, t time.Time) item {
	l.mu.Lock()
	defer l.mu.Unlock()
	it := item{ID: id}
	for _, s := range l.history[entity+":"+id] {
		if s.at.After(t) {
			break
		}
		it.Version = s.version
	}
	return it
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

// sourceRecorded is a user or an order as the load recorded it: their
// source is the load's own, their changes told by a message (users) or
// read from PostgreSQL's commit log (orders).
func (l *load) sourceRecorded(entity, id string) item {
	l.mu.Lock()
	defer l.mu.Unlock()
	return item{ID: id, Version: l.versions[entity+":"+id]}
}

func (l *load) loadProduct(id string) func(context.Context) (item, error) {
	return func(ctx context.Context) (item, error) {
		it, err := l.sourceProduct(ctx, id)
		slowly(ctx)
		return it, err
	}
}

func (l *load) loadRecorded(entity, id string) func(context.Context) (item, error) {
	return func(ctx context.Context) (item, error) {
		it := l.sourceRecorded(entity, id)
		slowly(ctx)
		return it, nil
	}
}

func (l *load) cachedProduct(ctx context.Context, id string) error {
	return readThrough(ctx, &l.wt, kindPlain, l.products, "cache:product:"+id, l.loadProduct(id))
}

func (l *load) cachedRecorded(entity string) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		return readThrough(ctx, &l.wt, kindPlain, l.users, "cache:"+entity+":"+id, l.loadRecorded(entity, id))
	}
}

func (l *load) naiveProduct(ctx context.Context, id string) error {
	return l.naive(ctx, "naive:product:"+id, l.loadProduct(id))
}

func (l *load) naiveRecorded(entity string) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		return l.naive(ctx, "naive:"+entity+":"+id, l.loadRecorded(entity, id))
	}
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
