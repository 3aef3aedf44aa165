package endpoint

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
)

// session relays one client: its commands, one by one, to the upstream
// node of the moment, and that node's replies back. It counts the replies
// owed, so that a pause can wait for them, and keeps the commands the
// client set its connection up with, so that a new upstream can be set up
// the same way.
type session struct {
	e      *Endpoint
	client *tls.Conn
	mu     sync.Mutex
	cond   *sync.Cond
	up     *tls.Conn
	owed   int // commands sent upstream whose replies have not come back
	// metering says, for each reply owed in turn, whether its command is
	// metered: its reply's bytes are counted too.
	metering []bool
	held     bool // the next command waits: paused
	closed   bool
	// setup are the commands the client sent before its first other one;
	// subscribed says it subscribed (pub/sub is not moved).
	setup      [][]byte
	settingUp  bool
	subscribed bool
	// raw says the client is a replica syncing through the endpoint: from
	// its PSYNC on, what the master sends (an RDB file, not a reply, then
	// the stream of its writes) is copied as it comes, and never moved.
	raw bool
}

// setupCommands are those a client sets its connection up with: sent
// again, in order, on a new upstream.
var setupCommands = map[string]bool{"HELLO": true, "AUTH": true, "CLIENT": true, "SELECT": true, "READONLY": true, "READWRITE": true}

func newSession(e *Endpoint, client, up *tls.Conn) *session {
	s := &session{e: e, client: client, up: up, settingUp: true}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// run relays until the client or its upstream goes, and closes both.
func (s *session) run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.commands(bufio.NewReader(s.client))
		s.close()
	}()
	s.replies(s.up)
	<-done
}

// commands copies the client's commands upstream, each in its RESP form,
// or the throttling reply's script in its place: a connection that
// subscribes is never throttled, as pub/sub is not.
func (s *session) commands(r *bufio.Reader) error {
	for {
		raw, name, err := readCommand(r)
		if err != nil {
			return err
		}
		s.mu.Lock()
		for s.held && !s.closed {
			s.cond.Wait()
		}
		if s.closed {
			s.mu.Unlock()
			return errClosed
		}
		s.subscribed = s.subscribed || strings.HasSuffix(name, "SUBSCRIBE")
		s.raw = s.raw || name == "PSYNC" || name == "SYNC"
		if s.settingUp = s.settingUp && setupCommands[name]; s.settingUp {
			s.setup = append(s.setup, raw)
		}
		metered := !s.subscribed && !unmetered[name] && !s.raw
		if l := s.e.currentLimit(); metered && l != nil && !l.allow() {
			raw, metered = throttledReply, false
		}
		if metered {
			s.e.meter(len(raw), true)
		}
		s.metering = append(s.metering, metered)
		s.owed++
		up := s.up
		s.mu.Unlock()
		// Written outside the lock: the replies, which take it, must go on
		// meanwhile, or a long pipeline would stall both ways.
		if _, err := up.Write(raw); err != nil {
			return err
		}
	}
}

var errClosed = errors.New("the session is closed")

// replies copies up's replies to the client, one by one, until up ends;
// when up is still the session's upstream then, the session ends.
func (s *session) replies(up *tls.Conn) {
	r := bufio.NewReader(up)
	var buf []byte
	for {
		s.mu.Lock()
		raw := s.raw
		s.mu.Unlock()
		if raw {
			_, _ = io.Copy(s.client, r)
			break
		}
		var push bool
		var err error
		buf, push, err = readReply(r, buf[:0])
		if err != nil {
			break
		}
		// Metered before the client has it: a client that read the reply
		// finds it counted.
		if !push {
			s.mu.Lock()
			if len(s.metering) > 0 {
				if s.metering[0] {
					s.e.meter(len(buf), false)
				}
				s.metering = s.metering[1:]
			}
			s.mu.Unlock()
		}
		if _, err := s.client.Write(s.e.rewritten(buf)); err != nil {
			break
		}
		if !push {
			s.mu.Lock()
			s.owed--
			s.cond.Broadcast()
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	// Held, the session outlives its upstream: the master it follows may
	// die before Repoint moves it on.
	current := s.up == up && !s.held
	s.mu.Unlock()
	if current {
		s.close()
	}
}

// pause holds the next command and waits, up to within, for the replies
// owed; false when they did not come, or the client subscribed.
func (s *session) pause(within time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
	if s.subscribed || s.raw {
		return false
	}
	deadline := time.AfterFunc(within, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer deadline.Stop()
	for start := time.Now(); s.owed > 0 && !s.closed && time.Since(start) < within; {
		s.cond.Wait()
	}
	return s.owed == 0 && !s.closed
}

// repoint moves the held session onto a new connection to target, set up
// as the client set up its first, and lets its commands go on.
func (s *session) repoint(target string) error {
	up, err := s.e.dial(target)
	if err != nil {
		return err
	}
	s.mu.Lock()
	setup := s.setup
	s.mu.Unlock()
	r := bufio.NewReader(up)
	for _, cmd := range setup {
		if _, err := up.Write(cmd); err != nil {
			up.Close()
			return err
		}
		if _, _, err := readReply(r, nil); err != nil {
			up.Close()
			return err
		}
	}
	s.mu.Lock()
	old := s.up
	s.up, s.held = up, false
	s.cond.Broadcast()
	s.mu.Unlock()
	old.Close()
	go s.replies(up)
	return nil
}

// close ends the session: the client's connection and its upstream's.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	up := s.up
	s.cond.Broadcast()
	s.mu.Unlock()
	s.client.Close()
	up.Close()
}

// readReply appends one RESP2 or RESP3 reply to buf, whole; push says it
// was a push (pub/sub, client tracking), which answers no command.
func readReply(r *bufio.Reader, buf []byte) (_ []byte, push bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return buf, false, err
	}
	buf = append(buf, line...)
	if len(line) < 3 {
		return buf, false, errors.New("a reply line too short")
	}
	n := 0
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return buf, false, nil
	case '$', '!', '=':
		if n, err = count(line); err != nil || n < 0 {
			return buf, false, err
		}
		start := len(buf)
		buf = append(buf, make([]byte, n+2)...)
		_, err = io.ReadFull(r, buf[start:])
		return buf, false, err
	case '*', '~', '>', '%', '|':
		if n, err = count(line); err != nil {
			return buf, false, err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if buf, _, err = readReply(r, buf); err != nil {
				return buf, false, err
			}
		}
		if line[0] == '|' { // attributes precede the reply they describe
			return readReply(r, buf)
		}
		return buf, line[0] == '>', nil
	default:
		return buf, false, errors.New("a reply of type " + string(line[0]))
	}
}

func count(line []byte) (int, error) {
	n := 0
	neg := false
	for _, c := range line[1 : len(line)-2] {
		switch {
		case c == '-' && !neg && n == 0:
			neg = true
		case c >= '0' && c <= '9':
			n = n*10 + int(c-'0')
		default:
			return 0, errors.New("a length " + string(line))
		}
	}
	if neg {
		n = -n
	}
	return n, nil
}
