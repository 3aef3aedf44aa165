package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/writethrough"
	"github.com/invalidator-go/invalidator/writethrough/near"
)

// nearGroup measures the local tier (writethrough/near): its hits against
// plain GETs in the same run, how long after the worker's delete the entry
// is gone in another process, and what its entries cost in memory.
func nearGroup(ctx context.Context, s server, bin string) {
	hits, plains := localHits(ctx, s.client)
	print("local_hit_ops_per_sec", median(hits))
	print("local_hit_vs_plain_get", medianRatio(hits, plains))
	lags, flushes := announceToDrop(ctx, s.client, bin)
	slices.Sort(lags)
	at := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	print("announce_to_drop_p50_ms", ms(at(0.50)))
	print("announce_to_drop_p99_ms", ms(at(0.99)))
	print("announce_flushes", float64(flushes))
	perEntry := localMemory(s.client)
	print("local_mib_per_100k_entries", perEntry*100_000/(1<<20))
	print("local_bytes_per_entry", perEntry)
}

// quiet logs what a channel warns of, not each subscription.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// openChannel subscribes to name through client and waits until it is.
func openChannel(client valkey.Client, opts near.ChannelOptions) *near.Channel {
	opts.Logger = quiet
	ch := near.Open(client, opts)
	waitFor("the local tier's subscription", 10*time.Second, ch.Subscribed)
	return ch
}

// localHits returns the hits/s of Get served by a local tier and the
// GETs/s of a plain GET loop on the same key, each from 16 goroutines, in
// three rounds: the local hits many more of them, for as long a round.
func localHits(ctx context.Context, client valkey.Client) (hit, plain []float64) {
	const workers, plainEach, localEach = 16, 20_000, 1_000_000
	ch := openChannel(client, near.ChannelOptions{})
	defer ch.Close()
	tier := near.New[product](ch, near.Options{})
	defer tier.Close()
	cache := writethrough.New[product](client, writethrough.Options[product]{Local: tier})
	key := "bench:near:{p}"
	for range 2 { // a fill, then the hit in the shared cache that the tier keeps
		if _, err := cache.Get(ctx, key, func(context.Context) (product, error) {
			return product{ID: "42", Name: "Walking boots", Price: 8999}, nil
		}); err != nil {
			log.Fatal(err)
		}
	}
	if _, _, ok := tier.Get(key); !ok {
		log.Fatal("near: the tier did not keep the hit")
	}
	for range 3 {
		plain = append(plain, opsPerSec(workers, plainEach, func() error { return client.Do(ctx, client.B().Get().Key(key).Build()).Error() }))
		hit = append(hit, opsPerSec(workers, localEach, func() error { _, err := cache.Get(ctx, key, hitOnly); return err }))
	}
	return hit, plain
}

// announceToDrop runs the poller, a process of its own, on a queue of its
// own, and fills a tier of this process with keys that change messages
// then name, ten a message, 20 messages every 50 ms: for each
// announcement, the time from the poller's deletes (its At) to the entries
// dropped here; and how often the tier flushed meanwhile (a gap, the
// subscription lost), which a sound run has none of.
func announceToDrop(ctx context.Context, client valkey.Client, bin string) (lags []time.Duration, flushes int64) {
	const messages, keysEach = 500, 10
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	q := sqs.NewFromConfig(cfg)
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-near-" + rand.Text()[:8])})
	if err != nil {
		log.Fatalf("near: create a queue: %v", err)
	}
	queue := aws.ToString(out.QueueUrl)
	defer q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(queue)})
	channel := "bench:near:" + rand.Text()[:8]

	var mu sync.Mutex
	announced := 0
	ch := openChannel(client, near.ChannelOptions{Channel: channel, OnMessage: func(m announce.Message, applied time.Time) {
		if !m.Heartbeat() {
			mu.Lock()
			lags, announced = append(lags, applied.Sub(m.At)), announced+len(m.Keys)
			mu.Unlock()
		}
	}})
	defer ch.Close()
	tier := near.New[string](ch, near.Options{MaxEntries: messages * keysEach})
	defer tier.Close()

	health := freeAddr()
	cmd := exec.Command(bin + "/poller/poller")
	cmd.Env = append(append(os.Environ(), functionEnv()...), "QUEUE_URL="+queue, "HEALTH_ADDR="+health, "POLLER_WAIT_TIME=1s",
		"ANNOUNCE_CHANNEL="+channel, "FAILURE_QUEUE_URL=", "SECOND_DELETE_QUEUE_URL=", "LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Fatalf("near: start the poller: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitHealthy(health)
	for sent := 0; sent < messages; sent += 10 {
		entries := make([]types.SendMessageBatchRequestEntry, 10)
		for i := range entries {
			keys := make([]string, keysEach)
			for k := range keys {
				keys[k] = "cache:near:" + strconv.Itoa((sent+i)*keysEach+k)
				tier.Reserve(keys[k])("v", false, 1, time.Now().Add(time.Hour))
			}
			body, _ := json.Marshal(map[string]any{"keys": keys})
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body))}
		}
		if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: entries}); err != nil {
			log.Fatalf("near: send: %v", err)
		}
		if sent%20 == 10 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("every key announced", time.Minute, func() bool { mu.Lock(); defer mu.Unlock(); return announced >= messages*keysEach })
	for _, n := range ch.Stats().Flushes {
		flushes += n
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(lags), flushes
}

// localMemory returns the heap an entry of a tier holding 100,000 products
// takes, its key and value included.
func localMemory(client valkey.Client) float64 {
	const n = 100_000
	ch := openChannel(client, near.ChannelOptions{})
	defer ch.Close()
	runtime.GC()
	before := heapBytes()
	tier := near.New[product](ch, near.Options{MaxEntries: 2 * n, MaxLifetime: time.Hour})
	for i := range n {
		id := strconv.Itoa(i)
		tier.Reserve("cache:product:"+id)(product{ID: id, Name: "Walking boots", Price: 8999}, false, 60, time.Now().Add(time.Hour))
	}
	if held := tier.Stats().Entries; held != n {
		log.Fatalf("near: the tier holds %d of %d entries", held, n)
	}
	runtime.GC()
	perEntry := float64(heapBytes()-before) / n
	tier.Close()
	return perEntry
}
