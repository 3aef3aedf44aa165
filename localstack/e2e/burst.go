package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/writethrough"
)

// The burst's shape: groups of writethrough keys, one group changed every
// burstEvery, each key looked at a second after its change — thousands of
// samples a second, which a bound of 1 in 1,000 takes.
const (
	burstGroups = 15  // each changed every 1.5 s: after its last change's look
	burstKeys   = 300 // per group: one change message names them all
	burstEvery  = 100 * time.Millisecond
	sampleAfter = time.Second
	// burstParallel bounds the changes being filled and published at once.
	burstParallel = 4
)

// burst samples writethrough keys a second after their change, during a
// fault that stops one node: each group of keys is filled through
// writethrough at its source's version, then changed — the source's
// version raised, one change message naming the keys published on the
// topic — and a second later each key still holding the version from
// before is stale. Keys in the slots of the node the fault stops are left
// out: the fault is meant to make those wait, not the others.
type burst struct {
	l              *load
	cache          *writethrough.Cache[item]
	groups         [][]string
	slots          map[string]int64 // key → its slot
	down           func(slot int64) bool
	version        sync.Map // key → int64, the source
	samples, stale atomic.Int64
	late           atomic.Int64 // the most time a stale key took to be fresh, since its change
	checks         sync.WaitGroup
	busy           []atomic.Bool // a group changed and not yet looked at
	stop           context.CancelFunc
	done           chan struct{}
}

// startBurst fills and changes keys until stopped; down tells the slots of
// the node the fault stops.
func (l *load) startBurst(ctx context.Context, name string, down func(slot int64) bool) (*burst, error) {
	b := &burst{l: l, down: down, slots: map[string]int64{}, done: make(chan struct{}),
		cache: writethrough.New[item](l.cache, writethrough.Options[item]{TTL: time.Hour, VersionOf: func(v item) int64 { return v.Version }})}
	for g := range burstGroups {
		var keys []string
		for k := range burstKeys {
			keys = append(keys, "cache:burst:"+name+"-"+strconv.Itoa(g)+"-"+strconv.Itoa(k))
		}
		b.groups = append(b.groups, keys)
	}
	if err := b.slotsOf(ctx); err != nil {
		return nil, err
	}
	ctx, b.stop = context.WithCancel(ctx)
	b.busy = make([]atomic.Bool, len(b.groups))
	go func() {
		defer close(b.done)
		// A change starts every burstEvery, a few at once when a loaded
		// machine makes each slow, each group not before its last look.
		var changes sync.WaitGroup
		defer changes.Wait()
		inFlight := make(chan struct{}, burstParallel)
		for i := 0; ctx.Err() == nil; i++ {
			g := i % len(b.groups)
			if b.busy[g].CompareAndSwap(false, true) {
				select {
				case inFlight <- struct{}{}:
					changes.Go(func() {
						defer func() { <-inFlight }()
						b.change(ctx, g)
					})
				case <-ctx.Done():
					b.busy[g].Store(false)
				}
			}
			wait.For(ctx, burstEvery)
		}
	}()
	return b, nil
}

// slotsOf asks the cache the slot of every key, all at once and again
// while a loaded machine makes it slow.
func (b *burst) slotsOf(ctx context.Context) error {
	var keys []string
	cmds := valkey.Commands{}
	for _, g := range b.groups {
		for _, k := range g {
			keys, cmds = append(keys, k), append(cmds, b.l.cache.B().ClusterKeyslot().Key(k).Build().Pin())
		}
	}
	var err error
	for range 5 {
		err = nil
		for i, r := range b.l.cache.DoMulti(ctx, cmds...) {
			slot, e := r.AsInt64()
			if e != nil {
				err = fmt.Errorf("the slot of %s: %w", keys[i], e)
				break
			}
			b.slots[keys[i]] = slot
		}
		if err == nil || !wait.For(ctx, time.Second) {
			return err
		}
	}
	return err
}

// change fills the live keys of group g, changes them, and looks at them a
// second later; then the group is free again.
func (b *burst) change(ctx context.Context, g int) {
	group := b.groups[g]
	var live []string
	for _, key := range group {
		if !b.down(b.slots[key]) {
			live = append(live, key)
		}
	}
	var fill sync.WaitGroup
	for _, key := range live {
		fill.Go(func() {
			_, _ = b.cache.Get(ctx, key, func(context.Context) (item, error) { return item{Version: b.sourceVersion(key)}, nil })
		})
	}
	fill.Wait()
	changed := make(map[string]int64, len(live))
	for _, key := range live {
		changed[key] = b.sourceVersion(key) + 1
		b.version.Store(key, changed[key])
	}
	body, _ := json.Marshal(map[string]any{"keys": live})
	if _, err := b.l.sns.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(b.l.env.topicARN), Message: aws.String(string(body))}); err != nil {
		b.busy[g].Store(false)
		return // not changed: nothing to sample
	}
	published := time.Now()
	b.checks.Go(func() {
		defer b.busy[g].Store(false)
		wait.For(context.WithoutCancel(ctx), sampleAfter)
		b.check(changed, published)
	})
}

func (b *burst) sourceVersion(key string) int64 {
	v, _ := b.version.LoadOrStore(key, int64(1))
	return v.(int64)
}

// check counts each key whose node stayed up: stale when it still holds a
// version older than the one its change made. A stale key is looked at
// until it is fresh, so that a run tells by how much it missed.
func (b *burst) check(changed map[string]int64, published time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var stale []string
	for key, version := range changed {
		if b.down(b.slots[key]) {
			continue
		}
		fresh, ok := b.fresh(ctx, key, version)
		if !ok {
			continue // unreadable: no sample
		}
		b.samples.Add(1)
		if !fresh {
			b.stale.Add(1)
			stale = append(stale, key)
		}
	}
	if len(stale) == 0 {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, key := range stale {
		for fresh, _ := b.fresh(ctx, key, changed[key]); !fresh && wait.For(ctx, 50*time.Millisecond); fresh, _ = b.fresh(ctx, key, changed[key]) {
		}
	}
	for late, took := b.late.Load(), time.Since(published).Milliseconds(); took > late && !b.late.CompareAndSwap(late, took); late = b.late.Load() {
	}
}

// fresh tells whether key no longer holds a version older than version;
// ok is false when it cannot be read.
func (b *burst) fresh(ctx context.Context, key string, version int64) (fresh, ok bool) {
	raw, err := b.l.cache.Do(ctx, b.l.cache.B().Get().Key(key).Build()).AsBytes()
	if err != nil && !valkey.IsValkeyNil(err) {
		return false, false
	}
	s, held := writethrough.Describe(raw)
	return err != nil || !held || s.Lease || s.Version >= version, true
}

// end stops changing, waits for the last looks, and returns the samples,
// the stale ones among them, and the most time a stale key took to be
// fresh.
func (b *burst) end() (samples, stale int64, late time.Duration) {
	b.stop()
	<-b.done
	b.checks.Wait()
	return b.samples.Load(), b.stale.Load(), time.Duration(b.late.Load()) * time.Millisecond
}

// slotsOf tells the slots the node at addr serves now, as the cluster
// says.
func slotsOf(ctx context.Context, client valkey.Client, addr string) (func(slot int64) bool, error) {
	ranges, err := client.Do(ctx, client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	var owned [][2]int64
	for _, r := range ranges {
		fields, err := r.ToArray()
		if err != nil || len(fields) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: %v", err)
		}
		master, err := fields[2].ToArray()
		if err != nil || len(master) < 2 {
			return nil, fmt.Errorf("CLUSTER SLOTS: %v", err)
		}
		host, _ := master[0].ToString()
		port, _ := master[1].AsInt64()
		if host+":"+strconv.FormatInt(port, 10) == addr {
			from, _ := fields[0].AsInt64()
			to, _ := fields[1].AsInt64()
			owned = append(owned, [2]int64{from, to})
		}
	}
	if len(owned) == 0 {
		return nil, fmt.Errorf("no slot is served by %s", addr)
	}
	return func(slot int64) bool {
		for _, r := range owned {
			if r[0] <= slot && slot <= r[1] {
				return true
			}
		}
		return false
	}, nil
}
