package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/invalidator-go/invalidator/internal/fleetbudget"
	"github.com/invalidator-go/invalidator/internal/wait"
)

// fault is one fault of a run: inject returns once it is over. stops is
// the port of the one node it stops, if any: the keys of the others are
// sampled meanwhile.
type fault struct {
	name   string
	inject func(ctx context.Context) error
	stops  int
}

// faults are the run's faults, in order. The driver is killed first: the
// messages of the invoke it cut come back after the queue's visibility
// timeout, as in AWS, and the run goes on meanwhile.
func (s *stack) faults(p plan, l *load) []fault {
	ports := s.env.cachePorts
	return []fault{
		{"driver-killed-restarted", func(ctx context.Context) error {
			s.driver.signal(syscall.SIGKILL)
			wait.For(ctx, p.restart)
			return s.driver.start()
		}, 0},
		// Debezium's crash: killed between reading the slot and
		// confirming it, or anywhere else, it reads again what it had not
		// confirmed.
		{"commitlog-killed-restarted", func(ctx context.Context) error {
			s.commitlog.signal(syscall.SIGKILL)
			wait.For(ctx, p.restart)
			return s.commitlog.start()
		}, 0},
		{"poller-stopped-restarted", func(ctx context.Context) error {
			s.poller.signal(syscall.SIGTERM)
			wait.For(ctx, p.restart)
			return s.poller.start()
		}, 0},
		{"node-killed-restarted-empty", func(ctx context.Context) error {
			if err := s.kill(ports[1], syscall.SIGKILL); err != nil {
				return err
			}
			wait.For(ctx, p.nodeDown)
			_ = os.Remove(filepath.Join(s.env.state, "cache", strconv.Itoa(ports[1]), "dump.rdb"))
			return s.cacheUp(ctx)
		}, ports[1]},
		{"node-restarted-with-its-data", func(ctx context.Context) error {
			if err := s.shutdown(ctx, ports[2]); err != nil {
				return err
			}
			wait.For(ctx, p.nodeDown)
			return s.cacheUp(ctx)
		}, ports[2]},
		{"all-nodes-frozen", func(ctx context.Context) error {
			for _, port := range ports {
				if err := s.kill(port, syscall.SIGSTOP); err != nil {
					return err
				}
			}
			wait.For(ctx, p.freeze)
			for _, port := range ports {
				if err := s.kill(port, syscall.SIGCONT); err != nil {
					return err
				}
			}
			return s.cacheUp(ctx)
		}, 0},
		{"slots-migrated", func(ctx context.Context) error {
			// Redirects (MOVED, ASK) while slots and their keys move.
			return s.reshard(ctx, ports[0], ports[1], p.reshard)
		}, 0},
		// The cache over its ECPU limit: the shard behind the endpoint
		// answers the throttling reply above 50 commands a second, the
		// worker's and the services' alike. The workers must have met it.
		{"cache-throttled", func(ctx context.Context) error {
			if s.shard == nil {
				return errors.New("no endpoint to throttle: CACHE_REPLICAS is unset")
			}
			logged := s.logSizes()
			refused := s.shard.endpoint.Throttle(50, p.throttle)
			met, err := s.countSince(logged, `"throttled":`)
			if err != nil {
				return err
			}
			log.Printf("cache-throttled: %d commands refused, %d of the workers' batches throttled", refused, met)
			if met == 0 {
				return errors.New("no worker's batch was throttled: the fault tested nothing")
			}
			return nil
		}, 0},
		// The fleet's budget denied to the worker's user on every node, as a
		// key pattern left out of its ACL would: every process goes on at
		// its fallback share, and says so.
		{"fleet-budget-denied", func(ctx context.Context) error {
			logged := s.logSizes()
			keys := []string{"ACL", "SETUSER", s.env.workerUser, "resetkeys"}
			for _, k := range strings.Fields(os.Getenv("WORKER_KEYS")) {
				keys = append(keys, "~"+k)
			}
			if err := s.eachNode(ctx, keys...); err != nil {
				return err
			}
			wait.For(ctx, p.throttle)
			if err := s.eachNode(ctx, "ACL", "SETUSER", s.env.workerUser, "~"+fleetbudget.Pattern); err != nil {
				return err
			}
			told, err := s.countSince(logged, "the fleet's ECPU budget cannot be read")
			if err != nil {
				return err
			}
			log.Printf("fleet-budget-denied: %d worker processes said they fell back", told)
			if told == 0 {
				return errors.New("no worker process fell back: the fault tested nothing")
			}
			return nil
		}, 0},
		// What ElastiCache does to a subscriber over its output buffer
		// limits: the local tiers' subscriptions cut, three times.
		{"pubsub-killed", func(ctx context.Context) error {
			for range 3 {
				if err := s.killSubscribers(ctx); err != nil {
					return err
				}
				wait.For(ctx, time.Second)
			}
			return nil
		}, 0},
		{"budget-exceeded", s.budgetExceeded(l, p.bigChanges), 0},
		// Recovery must not grow with the outage: a short one, then a long one.
		{"cache-down-5s", s.cacheDown(5 * time.Second), 0},
		{"cache-down", s.cacheDown(p.cacheDown), 0},
	}
}

// killSubscribers disconnects every pub/sub client of every node,
// replicas too, with CLIENT KILL TYPE pubsub.
func (s *stack) killSubscribers(ctx context.Context) error {
	ports := s.env.cachePorts
	if s.shard != nil {
		ports = append(slices.Clone(ports), s.shard.replica)
	}
	for _, port := range ports {
		cmd, err := s.cli(ctx, port, "CLIENT", "KILL", "TYPE", "pubsub")
		if err != nil {
			return err
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("CLIENT KILL TYPE pubsub on %d: %w\n%s", port, err, out)
		}
	}
	return nil
}

// cacheDown is the fault of every node shut down for d.
func (s *stack) cacheDown(d time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for _, port := range s.env.cachePorts {
			if err := s.shutdown(ctx, port); err != nil {
				return err
			}
		}
		wait.For(ctx, d)
		return s.cacheUp(ctx)
	}
}

// announced is the address clients reach the node on port at: the shard's
// endpoint for its master.
func (s *stack) announced(port int) string {
	if s.shard != nil && port == s.shard.master {
		return s.env.endpoint
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// eachNode runs a command on every node, the replica's included.
func (s *stack) eachNode(ctx context.Context, args ...string) error {
	ports := s.env.cachePorts
	if s.shard != nil {
		ports = append(slices.Clone(ports), s.shard.replica)
	}
	for _, port := range ports {
		if err := s.run(ctx, port, args...); err != nil {
			return err
		}
	}
	return nil
}

// kill sends sig to the cache node on port.
func (s *stack) kill(port int, sig syscall.Signal) error {
	data, err := os.ReadFile(filepath.Join(s.env.state, "run", "cache-"+strconv.Itoa(port)+".pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return err
	}
	return syscall.Kill(pid, sig)
}

// shutdown stops the node on port after saving its data, which it loads
// again when it restarts.
// cli is the cache's CLI run against the node on port as the admin user.
func (s *stack) cli(ctx context.Context, port int, args ...string) (*exec.Cmd, error) {
	cli, err := exec.LookPath("valkey-cli")
	if err != nil {
		if cli, err = exec.LookPath("redis-cli"); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, cli, append([]string{"--tls", "--cacert", s.env.ca, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
		"--user", s.env.cache.Username, "--no-auth-warning"}, args...)...)
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+s.env.cache.Password)
	return cmd, nil
}

// reshard moves n slots, keys and all, from the node on port from to the
// node on port to, as scaling the cache does, while the load runs.
func (s *stack) reshard(ctx context.Context, from, to, n int) error {
	ids := map[int]string{}
	for _, port := range []int{from, to} {
		cmd, err := s.cli(ctx, port, "CLUSTER", "MYID")
		if err != nil {
			return err
		}
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %d: %w", port, err)
		}
		ids[port] = strings.TrimSpace(string(out))
	}
	cmd, err := s.cli(ctx, from, "--cluster", "reshard", "127.0.0.1:"+strconv.Itoa(from), "--cluster-from", ids[from],
		"--cluster-to", ids[to], "--cluster-slots", strconv.Itoa(n), "--cluster-yes", "--cluster-pipeline", "20")
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("reshard: %w\n%s", err, out)
	}
	return nil
}

func (s *stack) shutdown(ctx context.Context, port int) error {
	cmd, err := s.cli(ctx, port, "SHUTDOWN", "SAVE")
	if err != nil {
		return err
	}
	// The node closes the connection as it goes: the command's own status
	// says nothing; the port closing does.
	_ = cmd.Run()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err != nil {
			return nil
		} else {
			conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d did not shut down", port)
		}
	}
}

// cacheUp restarts the stopped nodes and waits for the cluster to be whole.
func (s *stack) cacheUp(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(s.env.root, "localstack", "up.sh"), "cache")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("up.sh cache: %v\n%s", err, out)
	}
	return nil
}
