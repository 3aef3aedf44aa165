package main

import (
	"context"
	"log"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/invalidate/announce"
	"github.com/invalidator-go/invalidator/writethrough/near"
)

// fleetGroup models what the near cache's announcements cost a fleet —
// deliveries per service process per second, each counted as metered —
// and checks the model with 10 and 100 subscribed processes on the bench's
// server, idle and while a worker announces.
func fleetGroup(ctx context.Context, s server) {
	// The model does not depend on the fleet's size: an idle one is
	// quiet, where every process's heartbeat reached every other before.
	print("announce_deliveries_per_process_per_s_1000_idle", deliveriesPerProcess(1, 0))
	for _, processes := range []int{10, 100} {
		idle, busy := measureDeliveries(ctx, s.client, processes)
		p := strconv.Itoa(processes)
		print("announce_measured_idle_per_process_per_s_"+p, idle)
		print("announce_measured_vs_model_"+p, busy/deliveriesPerProcess(1, fleetAnnounceRate*announceBatch))
	}
}

// The model's assumptions: a worker announces once per batch of
// announceBatch changes (an SQS batch; a chunk is 500 keys, more than a
// batch's); its confirmations come 1, 2, 4 … 32 s after its last message,
// so none while it announces every second, and at most one a second
// otherwise; an idle publisher is quiet; services announce no writes.
// Every message reaches every process, and costs one delivery (under
// 1 KB: about 1 ECPU).
const (
	announceBatch     = 10
	confirmations     = 6
	fleetAnnounceRate = 20 // announcements a second in the measured run
)

// deliveriesPerProcess is what each service process receives a second
// from workers sharing changesPerSec.
func deliveriesPerProcess(workers int, changesPerSec float64) float64 {
	each := changesPerSec / announceBatch / float64(workers) // announcements a second per worker
	heartbeats := 0.0
	if each < 1 {
		heartbeats = min(1, confirmations*each)
	}
	return float64(workers) * (each + heartbeats)
}

// measureDeliveries opens processes channels on client, and returns what
// each received a second: idle, then while one worker announces
// fleetAnnounceRate times a second.
func measureDeliveries(ctx context.Context, client valkey.Client, processes int) (idle, busy float64) {
	name := "bench:fleet:" + strconv.Itoa(processes)
	chs := make([]*near.Channel, processes)
	for i := range chs {
		chs[i] = near.Open(client, near.ChannelOptions{Channel: name, Logger: quiet})
		defer chs[i].Close()
	}
	waitFor("the fleet's subscriptions", time.Minute, func() bool {
		for _, ch := range chs {
			if !ch.Subscribed() {
				return false
			}
		}
		return true
	})
	received := func() (n int64) {
		for _, ch := range chs {
			n += ch.Stats().Messages
		}
		return n
	}
	const window = 5 * time.Second
	before := received()
	time.Sleep(window)
	idle = float64(received()-before) / float64(processes) / window.Seconds()

	worker := announce.NewPublisher(announce.Valkey(client), name)
	beat, stop := context.WithCancel(ctx)
	defer stop()
	go worker.Beat(beat, time.Second, func(err error) { log.Printf("fleet: heartbeat: %v", err) })
	tick := time.NewTicker(time.Second / fleetAnnounceRate)
	defer tick.Stop()
	announced := func(until time.Time) {
		for time.Now().Before(until) {
			<-tick.C
			if err := worker.Announce(ctx, time.Now(), []string{"cache:fleet:1"}, nil); err != nil {
				log.Fatalf("fleet: %v", err)
			}
		}
	}
	announced(time.Now().Add(2 * time.Second)) // heartbeats under way
	time.Sleep(100 * time.Millisecond)         // the last delivered
	before = received()
	announced(time.Now().Add(window))
	time.Sleep(100 * time.Millisecond)
	busy = float64(received()-before) / float64(processes) / window.Seconds()
	return idle, busy
}
