package hostile

import (
	"context"
	"crypto/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/valkey-io/valkey-go"
	"gopkg.in/yaml.v3"

	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/internal/tagset"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// env is what one run of a row through one front end works with, fresh
// for it: the worker's SQS client and queues, its cache, and the means to
// fill the cache and look into it.
type env struct {
	stage                 string // fakes or stack
	sqs                   *limited
	producer              backend // sends the poller's input, unchecked: it is the producer's
	main, failure, delay  string  // queue URLs
	mainARN               string
	cacheEndpoint         string
	cache                 invalidate.Cache
	put                   func(t *testing.T, facts []fact)
	present               func(t *testing.T, keys []string) []string
	touched, cacheTrouble func() []string
}

// Queue names and sizes: the failure and delay queues as template.yaml
// makes them; the main queue may hold what SQS allows at most, 1 MiB, as a
// deployment may raise it to.
const mainQueueSize = 1 << 20

var (
	templateSizes     map[string]int
	templateSizesOnce sync.Once
)

// queueSizes are the MaximumMessageSize of the queues the worker sends to,
// by role, read from template.yaml.
func queueSizes(t *testing.T) map[string]int {
	templateSizesOnce.Do(func() {
		data, err := os.ReadFile("../../template.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var tmpl struct {
			Resources map[string]struct {
				Properties struct {
					MaximumMessageSize yaml.Node `yaml:"MaximumMessageSize"`
				} `yaml:"Properties"`
			} `yaml:"Resources"`
		}
		if err := yaml.Unmarshal(data, &tmpl); err != nil {
			t.Fatal(err)
		}
		size := func(id string) int {
			if n, err := strconv.Atoi(tmpl.Resources[id].Properties.MaximumMessageSize.Value); err == nil {
				return n
			}
			return defaultQueueSize
		}
		templateSizes = map[string]int{"main": mainQueueSize, "failure": size("FailureQueue"), "delay": size("SecondDeleteQueue")}
	})
	return templateSizes
}

// openFakes is a run on the fakes: a fake cache that holds what the row
// puts in it and answers what Valkey would to the rest, and a fake SQS.
// The fake cache takes keys, not requests: the requests' arguments are
// counted on the stack.
func openFakes(t *testing.T, ns string, watch []string) *env {
	sizes := queueSizes(t)
	back := &queuestest.SQS{}
	names := map[string]string{"main": "hostile-main", "failure": "hostile-failures", "delay": "hostile-again"}
	maxSize := map[string]int{}
	for role, name := range names {
		maxSize[name] = sizes[role]
	}
	c := cachetest.NewSparse(watch...)
	url := func(name string) string { return "https://sqs.us-east-1.amazonaws.com/123456789012/" + name }
	return &env{
		stage: "fakes",
		// The failure and delay queues are checked and counted, not kept.
		sqs:      newLimited(back, maxSize, func(name string) bool { return name == names["main"] }),
		producer: back, main: url(names["main"]), failure: url(names["failure"]), delay: url(names["delay"]),
		mainARN: "arn:aws:sqs:us-east-1:123456789012:" + names["main"], cacheEndpoint: "127.0.0.1:1",
		cache: c, put: func(_ *testing.T, facts []fact) { putFacts(c, facts) },
		present: func(_ *testing.T, keys []string) []string { return c.Present(keys) }, touched: c.Touched,
		cacheTrouble: func() []string { return nil },
	}
}

func set(keys []string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// putFacts stores what a row puts in the cache in the fake one: the
// facts' keys, their tags' entries, their fake replies.
func putFacts(c *cachetest.Sparse, facts []fact) {
	for _, f := range facts {
		switch {
		case f.fake != "":
			c.Reply(f.key, f.fake)
		case f.kind == "tag":
			c.Tag(f.key, f.values...)
		default:
			c.Put(f.key)
		}
	}
}

// stack is what every run on the local stack shares: moto's SQS and the
// cache, as the stack's admin user (to fill it) and as the worker's user.
type stack struct {
	sqs    *sqs.Client
	admin  valkey.Client
	worker valkey.Client
	cfg    elasticache.Config
}

func openStack(t *testing.T) *stack {
	cfg := testenv.WorkerCacheConfig(t)
	worker, err := elasticache.New(cfg)
	if err != nil {
		testenv.Unavailable(t, "the cache cluster is not answering: "+err.Error())
	}
	t.Cleanup(worker.Close)
	return &stack{sqs: awsenv.SQS(t), admin: testenv.Cache(t), worker: worker, cfg: cfg}
}

// open is a run on the stack: queues of its own in moto, sized as the
// template sizes them, deleted when the test ends; the worker's requests
// counted.
func (s *stack) open(t *testing.T, ns string, watch []string) *env {
	sizes := queueSizes(t)
	maxSize := map[string]int{}
	urls := map[string]string{}
	for _, role := range []string{"main", "failure", "delay"} {
		name := "hostile-" + strings.ToLower(ns) + "-" + role
		out, err := s.sqs.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name),
			Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(sizes[role])}})
		if err != nil {
			t.Fatalf("create queue %s: %v", name, err)
		}
		url := aws.ToString(out.QueueUrl)
		t.Cleanup(func() {
			_, _ = s.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		})
		maxSize[name], urls[role] = sizes[role], url
	}
	c := &counting{Client: s.worker, watch: set(watch), touched: map[string]bool{}}
	return &env{
		stage: "stack",
		sqs:   newLimited(s.sqs, maxSize, func(string) bool { return true }), producer: s.sqs,
		main: urls["main"], failure: urls["failure"], delay: urls["delay"],
		mainARN: "arn:aws:sqs:us-east-1:123456789012:" + queueName(urls["main"]), cacheEndpoint: s.cfg.Endpoint,
		cache: invalidate.Valkey(c), put: s.put, present: s.present,
		touched: func() []string {
			c.mu.Lock()
			defer c.mu.Unlock()
			var out []string
			for k := range c.touched {
				out = append(out, k)
			}
			return out
		},
		cacheTrouble: func() []string {
			c.mu.Lock()
			defer c.mu.Unlock()
			return append([]string(nil), c.violations...)
		},
	}
}

// put stores facts, each for ten minutes at most.
func (s *stack) put(t *testing.T, facts []fact) {
	c := s.admin
	reg := tagset.Registration(1, time.Now().Add(10*time.Minute))
	for _, f := range facts {
		var cmds valkey.Commands
		switch f.kind {
		case "string":
			cmds = append(cmds, c.B().Set().Key(f.key).Value(f.values[0]).Build())
		case "hash":
			h := c.B().Hset().Key(f.key).FieldValue()
			for i := 0; i+1 < len(f.values); i += 2 {
				h = h.FieldValue(f.values[i], f.values[i+1])
			}
			cmds = append(cmds, h.Build())
		case "list":
			cmds = append(cmds, c.B().Rpush().Key(f.key).Element(f.values...).Build())
		case "set":
			cmds = append(cmds, c.B().Sadd().Key(f.key).Member(f.values...).Build())
		case "zset":
			z := c.B().Zadd().Key(f.key).ScoreMember()
			for i, m := range f.values {
				z = z.ScoreMember(float64(i), m)
			}
			cmds = append(cmds, z.Build())
		case "stream":
			cmds = append(cmds, c.B().Xadd().Key(f.key).Id("*").FieldValue().FieldValue(f.values[0], f.values[1]).Build())
		case "tag":
			// The registrations, a thousand at a time.
			for start := 0; start < len(f.values); start += 1000 {
				h := c.B().Hset().Key(f.key).FieldValue()
				for _, k := range f.values[start:min(start+1000, len(f.values))] {
					h = h.FieldValue(k, reg)
				}
				cmds = append(cmds, h.Build())
			}
		default:
			t.Fatalf("fact %s: no kind %q", f.key, f.kind)
		}
		cmds = append(cmds, c.B().Expire().Key(f.key).Seconds(600).Build())
		for _, res := range c.DoMulti(t.Context(), cmds...) {
			if err := res.Error(); err != nil && !valkey.IsValkeyNil(err) {
				t.Fatalf("put %s (%s): %v", f.key, f.kind, err)
			}
		}
	}
}

func (s *stack) present(t *testing.T, keys []string) []string {
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = s.admin.B().Exists().Key(k).Build()
	}
	var out []string
	for i, res := range s.admin.DoMulti(t.Context(), cmds...) {
		if n, err := res.AsInt64(); err != nil {
			t.Fatalf("EXISTS %q: %v", keys[i], err)
		} else if n > 0 {
			out = append(out, keys[i])
		}
	}
	return out
}

// namespace is a run's own: its keys, tags and queues.
func namespace() string { return rand.Text()[:10] }
