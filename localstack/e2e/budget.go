package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// templateBudget is template.yaml's default CacheMaxECPUPerSecond.
const templateBudget = "5000"

// bigRecord is what the budget-exceeded fault saw of its message, at the
// template's budget and at the run's, and in the failure queue: how many
// times it was parked, and how many of those for its cost.
type bigRecord struct {
	keys              int
	atTemplate, atRun sent
	found, reasoned   int
}

// sent is what became of one sending of the big record: the SQS
// function's attempts at it, whether it was parked, how many of its keys
// were left once it was done or parked, and how long that took.
type sent struct {
	attempts, left int
	parked         bool
	took           time.Duration
}

// budgetExceeded is the budget-exceeded fault: one SQS message too big
// for an attempt at the template's default budget must be parked on its
// first delivery, its cost and the budget in the reason — never retried
// until the DLQ —; sent again at a budget it fits, as `replay
// --ecpu-per-second` would, every key of it is deleted. It changes
// changes users: by the run's rules 4 keys and a tag each — 25,000 ECPUs
// at least for 5,000 (make e2e), 15,000 for 3,000 (e2e-short) —, more
// than an attempt of the SQS function gives at the template's budget
// (5,000 ECPUs a second, 25 % of them a process's, 9 s: 11,250), less
// than at the run's (100,000: 225,000). Not the 10,000 a record may hold:
// its 40,000 second deletes and window entries (4 MB of messages) took
// moto over the 4 s an attempt had left after its deletes.
func (s *stack) budgetExceeded(l *load, changes int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		ids := make([]string, changes)
		var body strings.Builder
		body.WriteByte('[')
		for i := range ids {
			ids[i] = "e2e-big-" + run + "-" + strconv.Itoa(i)
			if i > 0 {
				body.WriteByte(',')
			}
			body.WriteString(`{"entity":"user","id":"` + ids[i] + `","version":1}`)
		}
		body.WriteByte(']')

		if err := s.restartDriver("CACHE_MAX_ECPU_PER_SECOND=" + templateBudget); err != nil {
			return err
		}
		big := bigRecord{keys: 4 * changes}
		var err error
		if big.atTemplate, err = s.sendBig(ctx, l, ids, body.String()); err != nil {
			return err
		}
		if err := s.restartDriver("CACHE_MAX_ECPU_PER_SECOND=" + os.Getenv("CACHE_MAX_ECPU_PER_SECOND")); err != nil {
			return err
		}
		big.atRun, err = s.sendBig(ctx, l, ids, body.String())
		l.big = &big
		log.Printf("budget-exceeded: at the template's budget %+v; at the run's %+v", big.atTemplate, big.atRun)
		return err
	}
}

// restartDriver restarts the driver, setting one more variable of its
// functions (the last one counts).
func (s *stack) restartDriver(variable string) error {
	s.driver.signal(syscall.SIGTERM)
	s.driver.env = append(s.driver.env, variable)
	return s.driver.start()
}

// sendBig sets the keys of ids, sends body to the raw queue, and waits up
// to two minutes for the SQS function to be done with it: parked, or
// invalidated.
func (s *stack) sendBig(ctx context.Context, l *load, ids []string, body string) (sent, error) {
	keys := make([]string, 0, 4*len(ids))
	for _, id := range ids {
		keys = append(keys, "cache:user:"+id, "naive:user:"+id, "replica:user:"+id, "e2e:mark:user:"+id+":1")
	}
	if err := eachChunk(ctx, l.cache, keys, func(b valkey.Builder, k string) valkey.Completed {
		return b.Set().Key(k).Value("big").Ex(time.Hour).Build()
	}, nil); err != nil {
		return sent{}, fmt.Errorf("set the big record's keys: %w", err)
	}
	logged, start := s.logSizes(), time.Now()
	out, err := l.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(l.env.rawQueue), MessageBody: aws.String(body)})
	if err != nil {
		return sent{}, fmt.Errorf("send the big record: %w", err)
	}
	var r sent
	id := `"record":"` + aws.ToString(out.MessageId) + `"`
	for deadline := start.Add(2 * time.Minute); ; {
		r.parked = s.linesSince(logged, id, `"fate":"parked"`) > 0
		if r.parked || s.linesSince(logged, id, `"msg":"record invalidated"`) > 0 {
			break
		}
		if time.Now().After(deadline) {
			err = errors.New("the big record was neither done nor parked in 2 minutes")
			break
		}
		if !wait.For(ctx, 200*time.Millisecond) {
			return r, ctx.Err()
		}
	}
	r.took = time.Since(start)
	r.attempts = s.linesSince(logged, id, `"msg":"record failed"`)
	if !r.parked && err == nil {
		r.attempts++ // the one that did it logs no failure
	}
	left, err2 := countExisting(ctx, l.cache, keys)
	r.left = left
	return r, errors.Join(err, err2)
}

// linesSince counts the workers' log lines holding both a and b, written
// since the sizes logSizes gave.
func (s *stack) linesSince(sizes map[string]int64, a, b string) int {
	n := 0
	for _, path := range s.logs() {
		data, err := os.ReadFile(path)
		if err != nil || sizes[path] > int64(len(data)) {
			continue
		}
		for line := range bytes.Lines(data[sizes[path]:]) {
			if bytes.Contains(line, []byte(a)) && bytes.Contains(line, []byte(b)) {
				n++
			}
		}
	}
	return n
}

// eachChunk sends one command per key, a thousand at a time, and gives
// each answer to answer, if any.
func eachChunk(ctx context.Context, c valkey.Client, keys []string, cmd func(valkey.Builder, string) valkey.Completed, answer func(valkey.ValkeyResult) error) error {
	for start := 0; start < len(keys); start += 1000 {
		chunk := keys[start:min(start+1000, len(keys))]
		cmds := make(valkey.Commands, len(chunk))
		for i, k := range chunk {
			cmds[i] = cmd(c.B(), k)
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return err
			}
			if answer != nil {
				if err := answer(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// countExisting counts the keys that exist.
func countExisting(ctx context.Context, c valkey.Client, keys []string) (int, error) {
	n := 0
	err := eachChunk(ctx, c, keys, func(b valkey.Builder, k string) valkey.Completed { return b.Exists().Key(k).Build() },
		func(r valkey.ValkeyResult) error {
			one, err := r.AsInt64()
			n += int(one)
			return err
		})
	return n, err
}

// print prints the big record's lines and notes its gates; a nil one was
// not sent.
func (b *bigRecord) print(line func(string, any), g *gates) {
	if b == nil {
		return
	}
	for _, at := range []struct {
		name string
		r    sent
	}{{"template_budget", b.atTemplate}, {"run_budget", b.atRun}} {
		line("budget_exceeded_"+at.name+"_attempts", at.r.attempts)
		line("budget_exceeded_"+at.name+"_parked", at.r.parked)
		line("budget_exceeded_"+at.name+"_keys_left", at.r.left)
		line("budget_exceeded_"+at.name+"_ms", at.r.took.Milliseconds())
	}
	t := b.atTemplate
	g.check("a record over its budget: parked on its first delivery, once, for its cost", fmt.Sprintf("%d attempt(s), %d parked, %d for its cost", t.attempts, b.found, b.reasoned),
		"1, 1, 1", t.parked && t.attempts == 1 && b.found == 1 && b.reasoned == 1)
	g.check("the same record within its budget: keys left once done", b.atRun.left, fmt.Sprintf("= 0 of %d", b.keys), !b.atRun.parked && b.atRun.attempts > 0 && b.atRun.left == 0)
}
