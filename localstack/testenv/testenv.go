package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/endpoint"
)

const howToStart = "start the local stack with `make up` and run tests with `make test` (or `. localstack/env.sh` first)"

// InCI reports whether the CI variable is set to a true value.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Unavailable stops a test whose local stack is missing: a skip on a
// developer's machine, a failure in CI.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("local stack required (CI is set): %s", why)
	}
	t.Skipf("local stack not available: %s; %s", why, howToStart)
}

// Getenv returns a variable of the stack's environment, or stops the test
// when it is unset. Every way into the stack starts here, so that -short
// skips every test that needs it, running or not.
func Getenv(t testing.TB, key string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local stack: not with -short")
	}
	v := os.Getenv(key)
	if v == "" {
		Unavailable(t, key+" is not set")
	}
	return v
}

// CacheConfig returns the worker's cache configuration for the local cluster.
func CacheConfig(t testing.TB) elasticache.Config {
	t.Helper()
	Getenv(t, "CACHE_ENDPOINT")
	cfg, err := elasticache.ConfigFromEnv(os.Getenv)
	if err != nil {
		Unavailable(t, err.Error())
	}
	return cfg
}

// WorkerCacheConfig is CacheConfig logged in as the worker's own user,
// which may run only what the worker needs (WORKER_ACL in env.sh): tests
// of the worker's binaries use it, so a command the user lacks fails them.
func WorkerCacheConfig(t testing.TB) elasticache.Config {
	t.Helper()
	cfg := CacheConfig(t)
	cfg.Username, cfg.Password = Getenv(t, "WORKER_USERNAME"), Getenv(t, "WORKER_PASSWORD")
	return cfg
}

// Cache returns a cluster client logged in as the stack's ACL user over TLS,
// closed when the test ends.
func Cache(t testing.TB) valkey.Client {
	t.Helper()
	client, err := elasticache.New(CacheConfig(t))
	if err != nil {
		Unavailable(t, "the cache cluster is not answering: "+err.Error())
	}
	t.Cleanup(client.Close)
	return client
}

// Connect returns a client of cfg, closed when the test ends.
func Connect(t testing.TB, cfg elasticache.Config) valkey.Client {
	t.Helper()
	c, err := elasticache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// OnEveryNode runs a command on every node of client's cluster: what each
// node keeps for itself, its ACL users and its connections among it.
func OnEveryNode(t testing.TB, client valkey.Client, args ...string) {
	t.Helper()
	for addr, node := range client.Nodes() {
		if err := node.Do(t.Context(), node.B().Arbitrary(args...).Build()).Error(); err != nil {
			t.Fatalf("%v on %s: %v", args, addr, err)
		}
	}
}

// User makes an ACL user named prefix and a random suffix, with rules, on
// every node of client's cluster, and deletes it when the test ends.
func User(t testing.TB, client valkey.Client, prefix string, rules ...string) string {
	t.Helper()
	user := prefix + strings.ToLower(rand.Text()[:8])
	OnEveryNode(t, client, append([]string{"ACL", "SETUSER", user}, rules...)...)
	t.Cleanup(func() {
		for _, node := range client.Nodes() {
			node.Do(context.Background(), node.B().AclDeluser().Username(user).Build())
		}
	})
	return user
}

// Cluster is a private TLS cluster started for one test, through the
// stack's own script, so a test may stop its nodes without disturbing the
// tests that share the stack's cluster.
type Cluster struct {
	Config elasticache.Config
	Ports  []int
	// Replica is the port of the last master's replica, and Master that
	// master's; StartClusterWithReplica's only. Failover swaps them.
	Replica, Master int
	// endpoints are StartServerlessCluster's: one per shard, by the port
	// of the master behind it.
	endpoints map[int]*endpoint.Endpoint
	ids       map[int]string // node IDs by port, read at the start
	env       []string
	state     string
}

// StartCluster starts a 3-master cluster on ports base..base+2, with its own
// state under .local/<name>, and stops it when the test ends. Tests that run
// in parallel must use different bases. TESTENV_PORT_OFFSET, when set, is
// added to every base: checkouts testing side by side on one machine each
// get ports of their own.
func StartCluster(t testing.TB, name string, base int) *Cluster {
	t.Helper()
	return startCluster(t, name, base, false)
}

// StartClusterWithReplica starts a cluster as StartCluster does, with a
// replica of its last master on base+3, which fails over only when told
// (CutReplica, Promote).
func StartClusterWithReplica(t testing.TB, name string, base int) *Cluster {
	t.Helper()
	return startCluster(t, name, base, true)
}

// StartServerlessCluster starts a cluster with a replica as
// StartClusterWithReplica does, whose clients see no node: every shard is
// behind an endpoint on base+10 and up (the nodes announce it), as
// ElastiCache Serverless hides its nodes behind one. HideFailover fails it
// over without any client seeing it.
func StartServerlessCluster(t testing.TB, name string, base int) *Cluster {
	t.Helper()
	c := startCluster(t, name, base, true, func(port int) int { return base + 10 + min(port-base, 2) })
	c.endpoints = map[int]*endpoint.Endpoint{}
	for i := range 3 {
		e, err := endpoint.Listen("127.0.0.1:"+strconv.Itoa(base+10+i), "127.0.0.1:"+strconv.Itoa(c.Ports[i]), filepath.Dir(c.Config.CAFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		c.endpoints[c.Ports[i]] = e
	}
	c.ids = map[int]string{c.Master: c.nodeID(t, c.Master), c.Replica: c.nodeID(t, c.Replica)}
	c.replicating(t) // through its master's endpoint, up only now
	c.Config.Endpoint = "127.0.0.1:" + strconv.Itoa(base+10)
	return c
}

// HideFailover fails the shard with the replica over, cut off since
// CutReplica, as Promote does, but no client sees it: its endpoint holds
// their connections and moves them to the promoted replica, and every
// endpoint shows the promoted replica's node ID as its old master's.
func (c *Cluster) HideFailover(t testing.TB) {
	t.Helper()
	e := c.endpoints[c.Master]
	oldID, newID := c.ids[c.Master], c.ids[c.Replica]
	e.Pause()
	c.Promote(t)
	for _, other := range c.endpoints {
		other.Rewrite(newID, oldID)
	}
	e.Repoint("127.0.0.1:" + strconv.Itoa(c.Master))
	c.endpoints[c.Master] = e
}

func (c *Cluster) nodeID(t testing.TB, port int) string {
	t.Helper()
	node := c.Node(t, port)
	defer node.Close()
	id, err := node.Do(t.Context(), node.B().ClusterMyid().Build()).ToString()
	if err != nil {
		t.Fatalf("CLUSTER MYID on %d: %v", port, err)
	}
	return id
}

func startCluster(t testing.TB, name string, base int, replica bool, announce ...func(port int) int) *Cluster {
	t.Helper()
	root := Getenv(t, "INVALIDATOR_ROOT")
	if offset := os.Getenv("TESTENV_PORT_OFFSET"); offset != "" {
		n, err := strconv.Atoi(offset)
		if err != nil {
			t.Fatalf("TESTENV_PORT_OFFSET: %v", err)
		}
		base += n
	}
	c := &Cluster{state: filepath.Join(root, ".local", name)}
	var ports []string
	for i := range 3 {
		c.Ports = append(c.Ports, base+i)
		ports = append(ports, strconv.Itoa(base+i))
	}
	endpoint := "127.0.0.1:" + ports[0]
	c.env = append(os.Environ(), "LOCAL_STATE="+c.state, "CACHE_PORTS="+strings.Join(ports, " "),
		"CACHE_ENDPOINT="+endpoint, "CACHE_CA_FILE="+filepath.Join(c.state, "tls", "ca.crt"))
	if replica {
		c.Master, c.Replica = base+2, base+3
		c.env = append(c.env, "CACHE_REPLICAS="+strconv.Itoa(c.Replica)+":"+strconv.Itoa(c.Master))
	}
	if len(announce) > 0 {
		var pairs []string
		for port := base; port <= base+3; port++ {
			pairs = append(pairs, strconv.Itoa(port)+":"+strconv.Itoa(announce[0](port)))
		}
		c.env = append(c.env, "CACHE_ANNOUNCE="+strings.Join(pairs, " "))
	}
	t.Cleanup(func() { c.script(t, "down.sh") })
	c.script(t, "up.sh", "cache")
	if replica && len(announce) == 0 {
		defer c.replicating(t) // once c.Config is set
	}
	cfg := CacheConfig(t)
	cfg.Endpoint, cfg.CAFile = endpoint, filepath.Join(c.state, "tls", "ca.crt")
	c.Config = cfg
	return c
}

func (c *Cluster) script(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(Getenv(t, "INVALIDATOR_ROOT"), "localstack", name)}, args...)...)
	cmd.Env = c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("localstack/%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// StopNode kills one node, as a crash would.
func (c *Cluster) StopNode(t testing.TB, port int) {
	t.Helper()
	pid := c.pid(t, port)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("stop node %d: %v", port, err)
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("node %d (pid %d) still running", port, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Freeze stops one node with SIGSTOP: its connections stay open and
// nothing answers, as with a host that hangs or a network that drops
// packets. Thaw ends it; the cluster's cleanup thaws a frozen node first.
func (c *Cluster) Freeze(t testing.TB, port int) {
	t.Helper()
	pid := c.pid(t, port)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze node %d: %v", port, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
}

// Thaw lets a frozen node run again.
func (c *Cluster) Thaw(t testing.TB, port int) {
	t.Helper()
	if err := syscall.Kill(c.pid(t, port), syscall.SIGCONT); err != nil {
		t.Fatalf("thaw node %d: %v", port, err)
	}
}

func (c *Cluster) pid(t testing.TB, port int) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.state, "run", "cache-"+strconv.Itoa(port)+".pid"))
	if err != nil {
		t.Fatalf("node %d: %v", port, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("node %d pidfile: %v", port, err)
	}
	return pid
}

// replicating waits until the replica's link to its master is up.
func (c *Cluster) replicating(t testing.TB) {
	t.Helper()
	node := c.Node(t, c.Replica)
	defer node.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		info, err := node.Do(t.Context(), node.B().Info().Section("replication").Build()).ToString()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d does not replicate its master 20 s after the start: %v %s", c.Replica, err, info)
		}
	}
}

// CutReplica cuts the replica off its master, as a lagging replica is:
// what the master does from now on, its replica does not get, until
// Promote loses it. What the master did before, the replica has.
func (c *Cluster) CutReplica(t testing.TB) {
	t.Helper()
	node := c.Node(t, c.Master)
	defer node.Close()
	// Not WAIT: it waits for what its own connection wrote, here nothing. A
	// replica that has just synced gets the master's writes only after its
	// first REPLCONF ACK, up to a second later.
	done := replOffset(t, node, "master_repl_offset")
	replica := c.Node(t, c.Replica)
	defer replica.Close()
	for deadline := time.Now().Add(5 * time.Second); replOffset(t, replica, "slave_repl_offset") < done; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d's replica did not catch up with offset %d in 5 s", c.Master, done)
		}
	}
	c.Freeze(t, c.Replica)
	if err := node.Do(t.Context(), node.B().ClientKill().TypeReplica().Build()).Error(); err != nil {
		t.Fatalf("cut the replica off node %d: %v", c.Master, err)
	}
}

// replOffset is a replication offset node tells in INFO, by its field.
func replOffset(t testing.TB, node valkey.Client, field string) int64 {
	t.Helper()
	info, err := node.Do(t.Context(), node.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		t.Fatalf("INFO replication: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO replication %s: %v", field, err)
			}
			return n
		}
	}
	t.Fatalf("INFO replication has no %s: %s", field, info)
	return 0
}

// Promote kills the master and promotes its replica, cut off since
// CutReplica: what the master did since is lost, as an asynchronous
// replica's failover loses it. Master and Replica swap: the old master, dead,
// stays as the replica's port.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	c.StopNode(t, c.Master)
	c.Thaw(t, c.Replica)
	node := c.Node(t, c.Replica)
	defer node.Close()
	if err := node.Do(t.Context(), node.B().ClusterFailover().Takeover().Build()).Error(); err != nil {
		t.Fatalf("promote node %d: %v", c.Replica, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		role, err := node.Do(t.Context(), node.B().Role().Build()).ToArray()
		if err == nil && len(role) > 0 {
			if r, _ := role[0].ToString(); r == "master" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d is not master 10 s after its takeover", c.Replica)
		}
	}
	c.Master, c.Replica = c.Replica, c.Master
}

// Node is a client of one node alone, as the stack's user.
func (c *Cluster) Node(t testing.TB, port int) valkey.Client {
	t.Helper()
	opt, err := c.Config.ClientOption()
	if err != nil {
		t.Fatal(err)
	}
	opt.InitAddress, opt.ForceSingleClient = []string{"127.0.0.1:" + strconv.Itoa(port)}, true
	node, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatalf("connect to node %d: %v", port, err)
	}
	return node
}

// Restart starts the stopped nodes again; they rejoin with their slots.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.script(t, "up.sh", "cache")
}

// Log collects output written and read from different goroutines: a
// process's log, read by the test while it runs.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
