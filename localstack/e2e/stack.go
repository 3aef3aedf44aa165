package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/endpoint"
)

// failoverAfter is the failover schedule of the run's workers: shorter than
// the template's minute, which every drain would wait out (the delay queue
// empty), longer than the replica's lag in the failovers (6 s).
const failoverAfter = 10 * time.Second

// env is the e2e stack's environment, as localstack/env.sh exports it.
type env struct {
	root, state                  string
	topicARN, queueURL, rawQueue string
	failureQueue, dlq, table     string
	againQueue                   string // of second deletes
	windowQueue                  string // the failover window
	inspectQueue                 string // the inspector's copy of the topic
	cdcStream                    string // the commit log's Kinesis stream
	cachePorts                   []int
	shard                        *shard             // behind one endpoint, for the failovers; nil: none
	endpoint                     string             // the shard's
	cache                        elasticache.Config // the ACL user of readers and checks
	workerUser, ca               string
	db                           *pgxpool.Pool // the stack's PostgreSQL, by the PG* variables
}

func loadEnv() (env, error) {
	e := env{root: os.Getenv("INVALIDATOR_ROOT"), state: os.Getenv("LOCAL_STATE"), topicARN: os.Getenv("TOPIC_ARN"),
		queueURL: os.Getenv("QUEUE_URL"), rawQueue: os.Getenv("RAW_QUEUE_URL"), failureQueue: os.Getenv("FAILURE_QUEUE_URL"),
		dlq: os.Getenv("DLQ_URL"), table: os.Getenv("TABLE_NAME"), againQueue: os.Getenv("SECOND_DELETE_QUEUE_URL"), windowQueue: os.Getenv("WINDOW_QUEUE_URL"), inspectQueue: os.Getenv("INSPECT_QUEUE_URL"), cdcStream: os.Getenv("CDC_STREAM_NAME"), workerUser: os.Getenv("WORKER_USERNAME"),
		ca: os.Getenv("CACHE_CA_FILE")}
	for _, v := range []string{e.root, e.state, e.topicARN, e.queueURL, e.rawQueue, e.failureQueue, e.dlq, e.table, e.workerUser, e.againQueue, e.windowQueue, e.inspectQueue, e.cdcStream} {
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
	if e.cache, err = elasticache.ConfigFromEnv(os.Getenv); err != nil {
		return e, err
	}
	e.db, err = pgxpool.New(context.Background(), "")
	return e, err
}

// rules are the worker's: every change deletes its cache-aside keys, its
// naive-recipe keys, its replica readers' keys, and a marker key naming its
// version, by which the run tells which changes were invalidated, by which
// path and when; and invalidates the tags of the list readers.
const rules = `
entities:
  user: ["cache:user:{id}", "naive:user:{id}", "replica:user:{id}", "e2e:mark:user:{id}:{version}"]
tables:
  TABLE: ["cache:product:{key.id}", "naive:product:{key.id}", "replica:product:{key.id}", "e2e:mark:product:{key.id}:{new.version}", "cache:category:{item.category}"]
  public.orders: ["cache:order:{key.id}", "naive:order:{key.id}", "replica:order:{key.id}", "e2e:mark:order:{key.id}:{new.version}"]
tags:
  entities: {user: ["user:{id}"]}
  tables: {TABLE: ["product:{key.id}", "category:{item.category}"]}
`

// stack is the worker under test: the poller, and the driver running the
// SQS, stream and Kinesis functions under the emulator; and the commit
// log's stand-in, which feeds the Kinesis stream from PostgreSQL.
type stack struct {
	env                       env
	poller, driver, commitlog *proc
	shard                     *shard
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
	driverBin, commitlogBin := filepath.Join(e.state, "bin", "driver"), filepath.Join(e.state, "bin", "commitlog")
	for pkg, out := range map[string]string{"./localstack/driver": driverBin, "./localstack/commitlog": commitlogBin} {
		if msg, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", pkg, err, msg)
		}
	}
	if err := e.sql(ctx, "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, version bigint)"); err != nil {
		return nil, fmt.Errorf("the orders table: %w", err)
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	var sh *shard
	if e.shard != nil {
		copied := *e.shard
		if copied.endpoint, err = endpoint.Listen(e.endpoint, "127.0.0.1:"+strconv.Itoa(copied.master), filepath.Join(e.state, "tls")); err != nil {
			return nil, fmt.Errorf("the shard's endpoint: %w", err)
		}
		sh = &copied
	}
	// The poller and the functions read the password by the ARN of the
	// secret that holds it, as in AWS; the rest is as deployed but for the
	// log level, the queues and the delay. The fleet's most processes are
	// this stack's, as a deployment sets WorkerMaxProcesses to its own: the
	// driver's SQS emulators, its stream's, the poller.
	const sqsConcurrency = 10
	worker := []string{"CACHE_USERNAME=" + e.workerUser, "CACHE_PASSWORD=", "CACHE_PASSWORD_SECRET_ARN=" + os.Getenv("WORKER_PASSWORD_SECRET_ARN"),
		"LOG_LEVEL=debug",
		"FAILURE_QUEUE_URL=" + e.failureQueue, "INVALIDATION_RULES=" + strings.ReplaceAll(rules, "TABLE", e.table),
		"SECOND_DELETE_QUEUE_URL=" + e.againQueue, "SECOND_DELETE_DELAY=" + secondDelete.String(), "FAILOVER_WINDOW_QUEUE_URL=" + e.windowQueue,
		"FAILOVER_REDELETE_AFTER=" + failoverAfter.String(), "CACHE_WORKER_MAX_PROCESSES=" + strconv.Itoa(sqsConcurrency+2)}
	s := &stack{env: e, shard: sh,
		poller: &proc{name: "poller", path: filepath.Join(bin, "poller", "poller"), log: filepath.Join(logs, "poller.log"),
			env:   append(worker, "QUEUE_URL="+e.queueURL, "HEALTH_ADDR="+health, "POLLER_WAIT_TIME=5s"),
			ready: func(int64) bool { return healthy(health) }},
		// A function timeout of 10 s: the raw queue's visibility is six
		// times that (make e2e sets it), as the template has it. Polls of
		// 5 s, as the poller's: the run stops and restarts the driver.
		driver: &proc{name: "driver", path: driverBin, log: filepath.Join(logs, "driver.log"), env: worker,
			args: []string{"-bin", bin, "-state", filepath.Join(e.state, "esm"), "-timeout", "10s", "-sqs-wait-time", "5s", "-sqs-concurrency", strconv.Itoa(sqsConcurrency),
				"-queue", e.rawQueue, "-table", e.table, "-kinesis", e.cdcStream, "-on-failure", e.failureQueue},
			// Its mappings and their functions' processes are up.
			ready: func(from int64) bool {
				return logged(filepath.Join(logs, "driver.log"), from, `"msg":"driver started"`)
			}},
		commitlog: &proc{name: "commitlog", path: commitlogBin, log: filepath.Join(logs, "commitlog.log"), args: []string{"-stream", e.cdcStream},
			ready: func(from int64) bool {
				return logged(filepath.Join(logs, "commitlog.log"), from, `"msg":"reading the commit log"`)
			}},
	}
	for _, p := range []*proc{s.poller, s.driver, s.commitlog} {
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

// close stops the worker, the commit log's stand-in and the shard's
// endpoint.
func (s *stack) close() {
	s.stop()
	s.commitlog.signal(syscall.SIGTERM)
	if s.shard != nil {
		s.shard.endpoint.Close()
	}
}

func (s *stack) logs() []string { return []string{s.poller.log, s.driver.log} }

// proc is a worker process, restartable, its output appended to a log.
type proc struct {
	name, path, log string
	args, env       []string
	// ready tells that the process started serves, given the size its
	// log had before: a fault that restarts it ends when it is back.
	ready  func(logFrom int64) bool
	cmd    *exec.Cmd
	exited chan struct{}
}

// logged tells whether the log at path holds line after offset from.
func logged(path string, from int64, line string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, from, 1<<40))
	return err == nil && bytes.Contains(data, []byte(line))
}

func (p *proc) start() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var logFrom int64
	if info, err := out.Stat(); err == nil {
		logFrom = info.Size()
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
	for deadline := time.Now().Add(15 * time.Second); p.ready != nil && !p.ready(logFrom); time.Sleep(50 * time.Millisecond) {
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
