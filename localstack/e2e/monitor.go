package main

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// monitor watches one node with MONITOR and notes when each key was first
// deleted there (UNLINK or DEL, a client's or a script's): what a failover's
// promoted replica did with the keys the failover brought back.
type monitor struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	first  map[string]time.Time
}

// monitor starts watching the node on port, and returns once the node
// watches for it.
func (s *stack) monitor(ctx context.Context, port int) (*monitor, error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd, err := s.cli(ctx, port, "MONITOR")
	if err != nil {
		cancel()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	m := &monitor{cancel: cancel, done: make(chan struct{}), first: map[string]time.Time{}}
	r := bufio.NewReader(out)
	if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "OK" {
		cancel()
		_ = cmd.Wait()
		return nil, errors.Join(errors.New("MONITOR on node "+strconv.Itoa(port)+" answered "+strconv.Quote(line)), err)
	}
	go func() {
		defer close(m.done)
		defer func() { _ = cmd.Wait() }()
		m.read(r)
	}()
	return m, nil
}

// read notes the deletes of the lines MONITOR writes:
// 1733330000.123456 [0 127.0.0.1:5555] "UNLINK" "key" ...
func (m *monitor) read(r *bufio.Reader) {
	for {
		line, err := r.ReadString('\n')
		if at, args, ok := monitorLine(line); ok && len(args) > 1 && (strings.EqualFold(args[0], "UNLINK") || strings.EqualFold(args[0], "DEL")) {
			m.mu.Lock()
			for _, key := range args[1:] {
				if _, seen := m.first[key]; !seen {
					m.first[key] = at
				}
			}
			m.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// monitorLine reads a MONITOR line: its time and its quoted arguments.
func monitorLine(line string) (at time.Time, args []string, ok bool) {
	stamp, rest, found := strings.Cut(line, " ")
	secs, err := strconv.ParseFloat(stamp, 64)
	if !found || err != nil {
		return at, nil, false
	}
	at = time.UnixMicro(int64(secs * 1e6))
	if _, rest, found = strings.Cut(rest, "] "); !found {
		return at, nil, false
	}
	for rest = strings.TrimSpace(rest); strings.HasPrefix(rest, `"`); rest = strings.TrimSpace(rest) {
		end := 1
		for end < len(rest) && rest[end] != '"' {
			if rest[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(rest) {
			return at, nil, false
		}
		arg, err := strconv.Unquote(rest[:end+1])
		if err != nil {
			arg = rest[1:end] // an escape Go does not share: compared as written
		}
		args, rest = append(args, arg), rest[end+1:]
	}
	return at, args, true
}

// deleted returns when key was first deleted since the watch began.
func (m *monitor) deleted(key string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.first[key]
	return at, ok
}

// stop ends the watch.
func (m *monitor) stop() {
	m.cancel()
	<-m.done
}
