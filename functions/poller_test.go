package functions

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"crypto/rand"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
)

// pollerProcess is the poller binary running against a test queue.
type pollerProcess struct {
	cmd    *exec.Cmd
	health string
	mu     sync.Mutex
	lines  []map[string]any
	exited chan error
}

func startPoller(t *testing.T, q queue, cfg elasticache.Config, env ...string) *pollerProcess {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	health := l.Addr().String()
	l.Close()
	p := &pollerProcess{health: health, exited: make(chan error, 1)}
	p.cmd = exec.Command(binary("poller"))
	// No second deletes unless env names a delay queue: the stack's own is
	// shared.
	p.cmd.Env = append(append(append(os.Environ(), "SECOND_DELETE_QUEUE_URL="), append(cfg.Env(), env...)...),
		"QUEUE_URL="+q.URL, "HEALTH_ADDR="+health, "POLLER_WAIT_TIME=1s")
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.collect(out)
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
	})
	eventually(t, 10*time.Second, "the poller's /healthz never answered 200", func() bool {
		resp, err := http.Get("http://" + health + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

func (p *pollerProcess) collect(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		os.Stderr.Write(append(sc.Bytes(), '\n'))
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
		}
	}
}

// succeeded counts the records that batches reported done.
func (p *pollerProcess) succeeded() (n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l["msg"] == "batch" {
			n += int(l["records"].(float64) - l["failed"].(float64))
		}
	}
	return n
}

// field is a field of the first line logged with msg, as text; empty when
// there is none.
func (p *pollerProcess) field(msg, name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l["msg"] == msg {
			return fmt.Sprint(l[name])
		}
	}
	return ""
}

func (p *pollerProcess) logged(msg string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l["msg"] == msg {
			return true
		}
	}
	return false
}

func TestPollerInvalidatesFromSNS(t *testing.T) {
	c := testenv.Cache(t)
	q := newQueue(t, 30*time.Second, 5)
	topic := newTopic(t, q)
	p := startPoller(t, q, testenv.WorkerCacheConfig(t))
	ns := rand.Text()
	var keys []string
	for i := range 25 {
		id := ns + strconv.Itoa(i)
		keys = append(keys, "cache:product:"+id)
		setKeys(t, c, "cache:product:"+id)
		if _, err := awsenv.SNS(t).Publish(t.Context(), &sns.PublishInput{
			TopicArn: aws.String(topic), Message: aws.String(`{"entity":"product","id":"` + id + `"}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "the keys were not all deleted", func() bool { return missing(t, c, keys) == len(keys) })
	eventually(t, 10*time.Second, "the queue was not drained", func() bool { return messages(t, q.URL) == 0 })
	// SQS delivers at least once (and moto now and then hands one message to
	// both receivers): a message may be done twice, none may be missed.
	if n := p.succeeded(); n < 25 {
		t.Fatalf("batches reported %d records done, want all 25", n)
	}
}

func missing(t *testing.T, c valkey.Client, keys []string) (n int) {
	t.Helper()
	for _, k := range keys {
		if e, err := c.Do(t.Context(), c.B().Exists().Key(k).Build()).AsInt64(); err == nil && e == 0 {
			n++
		}
	}
	return n
}

func sendRaw(t *testing.T, q queue, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := awsenv.SQS(t).SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPollerKeepsMessagesWhileTheCacheIsDown: valid messages are neither
// parked nor dead-lettered however long the cache is down, and are done
// once it is back.
func TestPollerKeepsMessagesWhileTheCacheIsDown(t *testing.T) {
	cluster := testenv.StartCluster(t, "poller-outage", 7221)
	q := newQueue(t, 2*time.Second, 10)
	failures, env := failureQueue(t)
	p := startPoller(t, q, cluster.Config, env...)
	for _, port := range cluster.Ports {
		cluster.StopNode(t, port)
	}
	sendRaw(t, q, `{"entity":"user","id":"1"}`, `{"entity":"user","id":"2"}`, `{"entity":"user","id":"3"}`)
	eventually(t, 10*time.Second, "no batch failed while the cache was down", func() bool { return p.logged("record failed") })
	eventually(t, 10*time.Second, "the gate did not shut", func() bool {
		return p.logged("the cache is unreachable: receiving stops, the cache is probed every 250 ms")
	})
	time.Sleep(5 * time.Second)
	if p.succeeded() != 0 || messages(t, q.DLQ) != 0 || messages(t, failures) != 0 {
		t.Fatalf("with the cache down: %d records done, %d in the DLQ, %d parked; want none", p.succeeded(), messages(t, q.DLQ), messages(t, failures))
	}
	cluster.Restart(t)
	eventually(t, 30*time.Second, "the messages were not processed after the cache came back", func() bool {
		return messages(t, q.URL) == 0 && p.succeeded() >= 3
	})
	if n := messages(t, q.DLQ) + messages(t, failures); n != 0 {
		t.Fatalf("%d messages dead-lettered or parked, want 0", n)
	}
}

func TestPollerDrainsOnSIGTERM(t *testing.T) {
	cluster := testenv.StartCluster(t, "poller-drain", 7231)
	cache, err := elasticache.New(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	q := newQueue(t, 30*time.Second, 5)
	p := startPoller(t, q, cluster.Config)

	// Every node sleeps for 3 s, so the batch is in flight when the signal comes.
	var sleeping sync.WaitGroup
	for addr, node := range cache.Nodes() {
		sleeping.Go(func() {
			if err := node.Do(t.Context(), node.B().Arbitrary("DEBUG", "SLEEP", "3").Build()).Error(); err != nil {
				t.Errorf("DEBUG SLEEP on %s: %v", addr, err)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	sendRaw(t, q, `{"entity":"user","id":"1"}`, `{"entity":"user","id":"2"}`)
	eventually(t, 15*time.Second, "the poller did not take both messages", func() bool { return inFlight(t, q.URL) == 2 && p.succeeded() == 0 })
	time.Sleep(500 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("poller exited with %v, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the poller did not exit after SIGTERM")
	}
	sleeping.Wait()
	if n := p.succeeded(); n < 2 {
		t.Fatalf("%d records finished, want both in flight", n)
	}
	// Nothing is left hidden: the finished batches are deleted, and what a
	// receive in flight brought while stopping is visible again. A copy moto
	// handed out twice, or one its answer lost and the SDK asked again for,
	// may come back visible (at least once): the next poller takes it.
	if n := inFlight(t, q.URL); n != 0 {
		t.Fatalf("%d messages left hidden: a finished batch was not deleted, or what the stop brought not handed back", n)
	}
}
