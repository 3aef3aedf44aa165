package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/internal/wait"
)

// env is the e2e stack's environment, as localstack/env.sh exports it.
type env struct {
	root, state                    string
	topicARN, queueURL, rawQueue   string
	failureQueue, dlq, table       string
	againQueue                     string // of second deletes
	inspectQueue                   string // the inspector's copy of the topic
	cachePorts                     []int
	shard                          *shard             // behind one endpoint, for the failovers; nil: none
	endpoint                       string             // the shard's
	cache                          elasticache.Config // the ACL user of readers and checks
	workerUser, workerPassword, ca string
}

func loadEnv() (env, error) {
	e := env{root: os.Getenv("INVALIDATOR_ROOT"), state: os.Getenv("LOCAL_STATE"), topicARN: os.Getenv("TOPIC_ARN"),
		queueURL: os.Getenv("QUEUE_URL"), rawQueue: os.Getenv("RAW_QUEUE_URL"), failureQueue: os.Getenv("FAILURE_QUEUE_URL"),
		dlq: os.Getenv("DLQ_URL"), table: os.Getenv("TABLE_NAME"), againQueue: os.Getenv("SECOND_DELETE_QUEUE_URL"), inspectQueue: os.Getenv("INSPECT_QUEUE_URL"), workerUser: os.Getenv("WORKER_USERNAME"),
		workerPassword: os.Getenv("WORKER_PASSWORD"), ca: os.Getenv("CACHE_CA_FILE")}
	for _, v := range []string{e.root, e.state, e.topicARN, e.queueURL, e.rawQueue, e.failureQueue, e.dlq, e.table, e.workerUser, e.againQueue, e.inspectQueue} {
		if v == "" {
			return e, errors.New("the e2e stack's environment is missing: run make e2e")
		}
	}
	for _, p := range strings.Fields(os.Getenv("CACHE_PORTS")) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return e, fmt.Errorf("CACHE_PORTS: %w", err)
		}
		e.cachePorts = append(e.cachePorts, n)
	}
	if len(e.cachePorts) != 3 {
		return e, errors.New("CACHE_PORTS: want the three ports of the e2e cluster")
	}
	var err error
	if e.shard, e.endpoint, err = parseShard(os.Getenv("CACHE_REPLICAS"), os.Getenv("CACHE_ANNOUNCE")); err != nil {
		return e, err
	}
	e.cache, err = elasticache.ConfigFromEnv(os.Getenv)
	return e, err
}

// rules are the worker's: every change deletes its cache-aside keys, its
// naive-recipe keys, its replica readers' keys, and a marker key naming its
// version, by which the run tells which changes were invalidated, by which
// path and when.
const rules = `
entities:
  user: ["cache:user:{id}", "naive:user:{id}", "replica:user:{id}", "e2e:mark:user:{id}:{version}"]
tables:
  TABLE: ["cache:product:{key.id}", "naive:product:{key.id}", "replica:product:{key.id}", "e2e:mark:product:{key.id}:{new.version}", "cache:category:{item.category}"]
`

// stack is the worker under test: the poller, and the driver running the
// SQS and stream functions under the emulator.
type stack struct {
	env            env
	poller, driver *proc
	shard          *shard
}

// newStack starts the worker, its second deletes secondDelete after the
// first (0: off).
func newStack(ctx context.Context, e env, bin string, secondDelete time.Duration) (*stack, error) {
	logs := filepath.Join(e.state, "logs")
	// A run starts afresh: no checkpoints of an earlier stream, no old logs.
	for _, dir := range []string{logs, filepath.Join(e.state, "esm")} {
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	driverBin := filepath.Join(e.state, "bin", "driver")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", driverBin, "./localstack/driver").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the driver: %v\n%s", err, out)
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	var sh *shard
	if e.shard != nil {
		copied := *e.shard
		if copied.endpoint, err = listenEndpoint(e.endpoint, "127.0.0.1:"+strconv.Itoa(copied.master)); err != nil {
			return nil, fmt.Errorf("the shard's endpoint: %w", err)
		}
		sh = &copied
	}
	// Only a reconnect sets a re-delete off, as on ElastiCache Serverless,
	// whose failover shows no new node: the failovers show it fires so.
	worker := []string{"CACHE_USERNAME=" + e.workerUser, "CACHE_PASSWORD=" + e.workerPassword, "LOG_LEVEL=debug", "REDELETE_ON_NEW_NODES=false",
		"POLLER_STATS_INTERVAL=10s",
		"FAILURE_QUEUE_URL=" + e.failureQueue, "INVALIDATION_RULES=" + strings.ReplaceAll(rules, "TABLE", e.table),
		"SECOND_DELETE_QUEUE_URL=" + e.againQueue, "SECOND_DELETE_DELAY=" + secondDelete.String()}
	s := &stack{env: e, shard: sh,
		poller: &proc{name: "poller", path: filepath.Join(bin, "poller", "poller"), log: filepath.Join(logs, "poller.log"),
			env:   append(worker, "QUEUE_URL="+e.queueURL, "HEALTH_ADDR="+health, "POLLER_WAIT_TIME=5s"),
			ready: func() bool { return healthy(health) }},
		// A function timeout of 10 s: the raw queue's visibility is six
		// times that (make e2e sets it), as the template has it.
		driver: &proc{name: "driver", path: driverBin, log: filepath.Join(logs, "driver.log"), env: worker,
			args: []string{"-bin", bin, "-state", filepath.Join(e.state, "esm"), "-timeout", "10s",
				"-queue", e.rawQueue, "-table", e.table, "-on-failure", e.failureQueue}},
	}
	for _, p := range []*proc{s.poller, s.driver} {
		if err := p.start(); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

// setSecondDelete restarts the poller and the driver with second deletes
// delay after the first (0: off).
func (s *stack) setSecondDelete(delay time.Duration) error {
	s.stop()
	for _, p := range []*proc{s.poller, s.driver} {
		p.env = append(p.env, "SECOND_DELETE_DELAY="+delay.String()) // the last one counts
		if err := p.start(); err != nil {
			return err
		}
	}
	return nil
}

func (s *stack) stop() {
	s.poller.signal(syscall.SIGTERM)
	s.driver.signal(syscall.SIGTERM)
}

// close stops the worker and the shard's endpoint.
func (s *stack) close() {
	s.stop()
	if s.shard != nil {
		s.shard.endpoint.close()
	}
}

func (s *stack) logs() []string { return []string{s.poller.log, s.driver.log} }

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
func (s *stack) faults(p plan) []fault {
	ports := s.env.cachePorts
	return []fault{
		{"driver-killed-restarted", func(ctx context.Context) error {
			s.driver.signal(syscall.SIGKILL)
			wait.For(ctx, p.restart)
			return s.driver.start()
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
			// Redirects (MOVED, ASK) while 2,000 slots and their keys move.
			return s.reshard(ctx, ports[0], ports[1], 2000)
		}, 0},
		// Recovery must not grow with the outage: a short one, then a long one.
		{"cache-down-5s", s.cacheDown(5 * time.Second), 0},
		{"cache-down", s.cacheDown(p.cacheDown), 0},
	}
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

// proc is a worker process, restartable, its output appended to a log.
type proc struct {
	name, path, log string
	args, env       []string
	ready           func() bool
	cmd             *exec.Cmd
	exited          chan struct{}
}

func (p *proc) start() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(p.path, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() { _ = p.cmd.Wait(); out.Close(); close(p.exited) }()
	for deadline := time.Now().Add(15 * time.Second); p.ready != nil && !p.ready(); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited at start; see %s", p.name, p.log)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready; see %s", p.name, p.log)
		}
	}
	return nil
}

// signal sends sig and waits for the process to exit (up to 30 s, then it
// is killed).
func (p *proc) signal(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func healthy(addr string) bool {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
