package endpoint

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// limit is the ECPUs a second the endpoint lets through while it
// throttles, each metered command counted as one: above it, a command is
// answered as ElastiCache Serverless answers one above the cache's
// ECPUPerSecond. AWS publishes no text for that reply (docs/operations.md);
// the worker tells it by its first word.
type limit struct {
	mu        sync.Mutex
	perSecond int
	second    time.Time
	used      int
	refused   int
}

func (l *limit) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now().Truncate(time.Second); !now.Equal(l.second) {
		l.second, l.used = now, 0
	}
	if l.used >= l.perSecond {
		l.refused++
		return false
	}
	l.used++
	return true
}

// Throttle lets perSecond metered commands a second through for d, and
// returns how many it refused.
func (e *Endpoint) Throttle(perSecond int, d time.Duration) int {
	l := &limit{perSecond: perSecond}
	e.mu.Lock()
	e.limit = l
	e.mu.Unlock()
	time.Sleep(d)
	e.mu.Lock()
	e.limit = nil
	e.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// meter counts a metered command's request, or its reply, of n bytes in
// ECPUs as AWS describes them: a KB transferred, at least one a command.
// It counts what the cache would, not what a client's model says it costs.
func (e *Endpoint) meter(n int, request bool) {
	m := int64(n) * 1000 / 1024
	if request {
		m = max(m, 1000)
	}
	e.metered.Add(m)
}

// Metered is the ECPUs of the commands let through so far, replies
// included (meter).
func (e *Endpoint) Metered() float64 { return float64(e.metered.Load()) / 1000 }

// currentLimit is the throttling of the moment; nil: none.
func (e *Endpoint) currentLimit() *limit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.limit
}

// unmetered are the commands the throttling lets through: those AWS's own
// estimator (agent-toolkit-for-aws, command_classifier.py) leaves out of
// the ECPUs, which a client needs to connect and find the cluster.
var unmetered = map[string]bool{"AUTH": true, "HELLO": true, "CLIENT": true, "CLUSTER": true, "PING": true, "INFO": true,
	"READONLY": true, "READWRITE": true, "ASKING": true, "MULTI": true, "EXEC": true, "PUBLISH": true,
	"SUBSCRIBE": true, "UNSUBSCRIBE": true, "SSUBSCRIBE": true, "SUNSUBSCRIBE": true}

// throttledReply is a script whose reply is the throttling error: sent in
// a throttled command's place, the master answers it in its turn, so the
// replies keep the commands' order.
var throttledReply = respCommand("EVAL", "return redis.error_reply('THROTTLED the cache is over its ECPU limit (e2e)')", "0")

// readCommand reads one command: a RESP array of bulk strings, as clients
// send them, or an inline one. It returns its bytes and its name.
func readCommand(r *bufio.Reader) (raw []byte, name string, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, "", err
	}
	raw = append(raw, line...)
	if line[0] != '*' {
		first, _, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
		return raw, strings.ToUpper(first), nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(line[1:])))
	if err != nil {
		return nil, "", fmt.Errorf("a command of %q elements", line)
	}
	for i := range n {
		head, err := r.ReadSlice('\n')
		if err != nil {
			return nil, "", err
		}
		raw = append(raw, head...)
		size, err := strconv.Atoi(strings.TrimSpace(string(head[1:])))
		if err != nil || head[0] != '$' {
			return nil, "", fmt.Errorf("an argument %q", head)
		}
		start := len(raw)
		raw = append(raw, make([]byte, size+2)...)
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return nil, "", err
		}
		if i == 0 {
			name = strings.ToUpper(string(raw[start : start+size]))
		}
	}
	return raw, name, nil
}

func respCommand(args ...string) []byte {
	out := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		out = fmt.Appendf(out, "$%d\r\n%s\r\n", len(a), a)
	}
	return out
}
