package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/localstack/endpoint"
)

// shard is the cluster's shard behind the endpoint: its master and its
// replica, by their own ports, which trade places at each failover.
type shard struct {
	master, replica int
	endpoint        *endpoint.Endpoint
}

// parseShard reads the shard that make e2e puts behind one endpoint:
// CACHE_REPLICAS="REPLICA:MASTER" and CACHE_ANNOUNCE, where both announce
// the endpoint's port. None when they are unset.
func parseShard(replicas, announce string) (*shard, string, error) {
	if replicas == "" {
		return nil, "", nil
	}
	var s shard
	if _, err := fmt.Sscanf(replicas, "%d:%d", &s.replica, &s.master); err != nil {
		return nil, "", fmt.Errorf("CACHE_REPLICAS=%q: want one REPLICA:MASTER pair", replicas)
	}
	ports := map[int]string{}
	for _, pair := range strings.Fields(announce) {
		port, announced, _ := strings.Cut(pair, ":")
		n, _ := strconv.Atoi(port)
		ports[n] = announced
	}
	if ports[s.master] == "" || ports[s.master] != ports[s.replica] {
		return nil, "", fmt.Errorf("CACHE_ANNOUNCE=%q: want the master and its replica announcing one port", announce)
	}
	return &s, "127.0.0.1:" + ports[s.master], nil
}

// failoverResult is a failover of the shard under a load of its own: the
// replica behind its master by lag, second deletes delay after the first.
type failoverResult struct {
	delay, lag         time.Duration
	invisible          bool
	cameBack, reverted int // keys the promotion brought back, or back to another value
	// Of the keys the promotion brought back — deletes the failover lost
	// —, those deleted again on the promoted replica, and when the last of
	// them was, after the promotion.
	deletedAgain int
	lastAgain    time.Duration
	redeletes    int // re-deletes of the window the workers logged after it
	drained      bool
	drain        time.Duration // how long its drain took
	stale        staleCounts
}

func (f failoverResult) name() string {
	sd := "off"
	if f.delay > 0 {
		sd = f.delay.String()
	}
	name := "failover_lag_" + f.lag.String() + "_second_delete_" + sd
	if f.invisible {
		name += "_invisible"
	}
	return name
}

// runFailover restarts the worker with second deletes delay after the
// first (0: off), runs writers and readers on entities of their own, fails
// the shard over with its replica lag behind, lets the load run on for
// steady, drains, and counts what the failover left stale, and which of
// the deletes it lost were done again.
func runFailover(ctx context.Context, env env, s *stack, delay, lag time.Duration, invisible bool, steady time.Duration, start time.Time) (failoverResult, error) {
	r := failoverResult{delay: delay, lag: lag, invisible: invisible}
	if err := s.setSecondDelete(delay); err != nil {
		return r, err
	}
	l, err := newLoad(ctx, env, "fo-"+strconv.Itoa(int(lag.Seconds()))+"-"+strconv.FormatBool(delay > 0)+"-"+strconv.FormatBool(invisible)+"-", false)
	if err != nil {
		return r, err
	}
	progress := startProgress(start, l)
	defer progress.stop()
	progress.phase(r.name())
	l.start(ctx)
	wait.For(ctx, steady) // the readers fill the cache
	logged := s.logSizes()
	lost, promoted, watch, err := s.failover(ctx, lag, invisible, l.prefix)
	if err != nil {
		return r, err
	}
	defer watch.stop()
	r.cameBack, r.reverted = len(lost.cameBack), lost.reverted
	wait.For(ctx, steady)
	progress.phase(r.name() + ", draining")
	l.stopWriters()
	r.drain, r.drained = l.drain(ctx, raceDrain)
	l.stopReaders()
	if r.stale, err = l.stale(ctx); err != nil {
		return r, err
	}
	for _, key := range lost.cameBack {
		if at, ok := watch.deleted(key); ok {
			r.deletedAgain++
			r.lastAgain = max(r.lastAgain, at.Sub(promoted))
		}
	}
	r.redeletes, err = s.countSince(logged, `"msg":"keys deleted again after a sign of a failover"`)
	return r, err
}

// lostDeletes are what a failover undid: the keys it brought back, and how
// many it turned back to another value.
type lostDeletes struct {
	cameBack []string
	reverted int
}

// failover fails the shard over the way ElastiCache can lose deletes: the
// replica cut off from its master for lag, writes and deletes going on;
// then the master killed, the replica promoted, and the old master brought
// back as its replica. The endpoint drops the clients' connections, or,
// invisible, holds them and moves them to the promoted replica. It
// returns, of the keys with prefix in their name, what the promotion
// undid; when the promotion was, and a watch of the promoted replica's
// deletes from then on.
func (s *stack) failover(ctx context.Context, lag time.Duration, invisible bool, prefix string) (lost lostDeletes, promoted time.Time, watch *monitor, err error) {
	sh := s.shard
	if err := s.kill(sh.replica, syscall.SIGSTOP); err != nil {
		return lost, promoted, nil, err
	}
	if err := s.run(ctx, sh.master, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		return lost, promoted, nil, err
	}
	wait.For(ctx, lag)
	if invisible {
		sh.endpoint.Pause()
	} else {
		sh.endpoint.Cut()
	}
	before, err := s.snapshot(ctx, sh.master, prefix)
	if err != nil {
		return lost, promoted, nil, err
	}
	if err := s.kill(sh.master, syscall.SIGKILL); err != nil {
		return lost, promoted, nil, err
	}
	if err := s.kill(sh.replica, syscall.SIGCONT); err != nil {
		return lost, promoted, nil, err
	}
	if err := s.run(ctx, sh.replica, "CLUSTER", "FAILOVER", "TAKEOVER"); err != nil {
		return lost, promoted, nil, err
	}
	// A node is master before it takes commands: until its cluster state is
	// ok it answers CLUSTERDOWN (which once ended a run here).
	for deadline := time.Now().Add(10 * time.Second); !s.isMaster(ctx, sh.replica) || !s.clusterOK(ctx, sh.replica); wait.For(ctx, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return lost, promoted, nil, fmt.Errorf("node %d is not a master in a cluster that is ok 10 s after its takeover", sh.replica)
		}
	}
	promoted = time.Now()
	after, err := s.snapshot(ctx, sh.replica, prefix)
	if err != nil {
		return lost, promoted, nil, err
	}
	for k, v := range after {
		was, ok := before[k]
		switch {
		case !ok:
			lost.cameBack = append(lost.cameBack, k)
		case was != v:
			lost.reverted++
		}
	}
	// Watched before the clients reach it: every delete it gets is seen.
	if watch, err = s.monitor(ctx, sh.replica); err != nil {
		return lost, promoted, nil, err
	}
	if invisible {
		sh.endpoint.Repoint("127.0.0.1:" + strconv.Itoa(sh.replica))
	} else {
		sh.endpoint.Follow("127.0.0.1:" + strconv.Itoa(sh.replica))
	}
	sh.master, sh.replica = sh.replica, sh.master
	return lost, promoted, watch, s.cacheUp(ctx) // the old master comes back as the replica
}

// run runs a command on the node on port.
func (s *stack) run(ctx context.Context, port int, args ...string) error {
	cmd, err := s.cli(ctx, port, args...)
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil || bytes.HasPrefix(out, []byte("ERR")) {
		return fmt.Errorf("%s on %d: %v %s", strings.Join(args, " "), port, err, out)
	}
	return nil
}

func (s *stack) isMaster(ctx context.Context, port int) bool {
	cmd, err := s.cli(ctx, port, "ROLE")
	if err != nil {
		return false
	}
	out, err := cmd.Output()
	return err == nil && bytes.HasPrefix(out, []byte("master"))
}

// clusterOK says whether the node on port sees its cluster's state ok.
func (s *stack) clusterOK(ctx context.Context, port int) bool {
	cmd, err := s.cli(ctx, port, "CLUSTER", "INFO")
	if err != nil {
		return false
	}
	out, err := cmd.Output()
	return err == nil && bytes.Contains(out, []byte("cluster_state:ok"))
}

// snapshot reads every key with prefix in its name that the node on port
// holds, and its value, through a connection of its own to that node: the
// values, not the tags' hashes.
func (s *stack) snapshot(ctx context.Context, port int, prefix string) (map[string]string, error) {
	node, err := s.nodeClient(port)
	if err != nil {
		return nil, err
	}
	defer node.Close()
	keys := map[string]string{}
	for cursor := uint64(0); ; {
		entry, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match("*"+prefix+"*").Count(1000).Type("string").Build()).AsScanEntry()
		if err != nil {
			return nil, err
		}
		for _, k := range entry.Elements {
			v, err := node.Do(ctx, node.B().Get().Key(k).Build()).ToString()
			if err != nil && !valkey.IsValkeyNil(err) {
				return nil, err
			}
			keys[k] = v
		}
		if cursor = entry.Cursor; cursor == 0 {
			return keys, nil
		}
	}
}

// logSizes are how long the workers' logs are now.
func (s *stack) logSizes() map[string]int64 {
	sizes := map[string]int64{}
	for _, path := range s.logs() {
		if fi, err := os.Stat(path); err == nil {
			sizes[path] = fi.Size()
		}
	}
	return sizes
}

// countSince counts the workers' log lines holding what, written since the
// sizes logSizes gave.
func (s *stack) countSince(sizes map[string]int64, what string) (int, error) {
	n := 0
	for _, path := range s.logs() {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		if from := sizes[path]; from <= int64(len(data)) {
			n += bytes.Count(data[from:], []byte(what))
		}
	}
	return n, nil
}

// printFailovers prints each failover's lines and notes its gates: no
// writethrough value is ever left stale, none of any reader with the
// second delete on, every delete the failover lost done again within
// lim.failoverAgain of the promotion, and the window deleted again after
// each.
func printFailovers(fs []failoverResult, line func(string, any), g *gates, lim limits) {
	for _, f := range fs {
		name := f.name()
		line(name+"_came_back", f.cameBack)
		line(name+"_reverted", f.reverted)
		line(name+"_deleted_again", f.deletedAgain)
		line(name+"_last_again_ms", f.lastAgain.Milliseconds())
		line(name+"_redeletes", f.redeletes)
		line(name+"_stale_writethrough", f.stale.writethrough)
		line(name+"_stale_naive", f.stale.naive)
		line(name+"_stale_replica", f.stale.replica)
		line(name+"_stale_list", f.stale.list)
		line(name+"_drained", f.drained)
		line(name+"_drain_s", int(f.drain.Seconds()))
		stale := f.stale.writethrough + f.stale.list
		what := "writethrough, list"
		if f.delay > 0 {
			stale += f.stale.naive + f.stale.replica
			what = "every reader"
		}
		g.check(name+": stale after the drain ("+what+")", stale, "= 0, drained", stale == 0 && f.drained)
		g.check(name+": deletes it lost done again, the last after the promotion",
			fmt.Sprintf("%d of %d, %d ms", f.deletedAgain, f.cameBack, f.lastAgain.Milliseconds()),
			fmt.Sprintf("all, ≤ %d ms", lim.failoverAgain.Milliseconds()), f.deletedAgain == f.cameBack && f.lastAgain <= lim.failoverAgain)
		g.check(name+": the window deleted again", f.redeletes, "> 0", f.redeletes > 0)
	}
}
