package endpoint

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint listens for clients of one shard and relays each connection to
// the shard's master, ending the clients' TLS and reading their commands
// one by one, so that it can throttle them, hold them, or send them on to
// another node without the client seeing it.
type Endpoint struct {
	ln       net.Listener
	server   *tls.Config // as the stack's nodes, by their certificate
	upstream *tls.Config
	mu       sync.Mutex
	target   string // the master's own address; empty: connections are refused
	holding  bool   // paused: new connections wait for Repoint
	sessions map[*session]bool
	limit    *limit            // nil: nothing is throttled
	metered  atomic.Int64      // ECPUs let through, in thousandths
	rewrite  map[string]string // in replies, each key's bytes become its value's
}

// Listen listens on addr for target, with the TLS files of the stack under
// dir (ca.crt, server.crt, server.key).
func Listen(addr, target, dir string) (*Endpoint, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in " + filepath.Join(dir, "ca.crt"))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	e := &Endpoint{ln: ln, target: target, sessions: map[*session]bool{},
		server: &tls.Config{Certificates: []tls.Certificate{cert}}, upstream: &tls.Config{RootCAs: roots, ServerName: "localhost"}}
	go e.serve()
	return e, nil
}

// Addr is the address the endpoint listens on.
func (e *Endpoint) Addr() string { return e.ln.Addr().String() }

func (e *Endpoint) serve() {
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		go e.accept(c)
	}
}

// accept relays a client to the target, until either side closes.
func (e *Endpoint) accept(raw net.Conn) {
	e.mu.Lock()
	for deadline := time.Now().Add(10 * time.Second); e.holding && time.Now().Before(deadline); {
		e.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		e.mu.Lock()
	}
	target := e.target
	e.mu.Unlock()
	if target == "" {
		raw.Close()
		return
	}
	up, err := e.dial(target)
	if err != nil {
		raw.Close()
		return
	}
	s := newSession(e, tls.Server(raw, e.server), up)
	e.mu.Lock()
	if e.target != target { // cut meanwhile
		e.mu.Unlock()
		s.close()
		return
	}
	s.held = e.holding // paused meanwhile: held as the others, until Repoint
	e.sessions[s] = true
	e.mu.Unlock()
	s.run()
	e.mu.Lock()
	delete(e.sessions, s)
	e.mu.Unlock()
}

func (e *Endpoint) dial(target string) (*tls.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", target, e.upstream)
}

// Cut drops every connection, and refuses new ones until Follow: from now
// on the master gets nothing more.
func (e *Endpoint) Cut() { e.Follow("") }

// Follow drops every connection and sends the new ones to target: a
// failover as ElastiCache Serverless often shows one, connections dropped
// and made again to the same endpoint.
func (e *Endpoint) Follow(target string) {
	e.mu.Lock()
	e.target, e.holding = target, false
	sessions := e.all()
	e.mu.Unlock()
	for _, s := range sessions {
		s.close()
	}
}

// Pause holds every connection's next command, once the replies to those
// sent are back, and the new connections, until Repoint: the master gets
// nothing more, and no client sees a thing. A connection whose replies do
// not come within 5 s (a loaded machine's), or that subscribed (its
// subscriptions cannot move), is dropped.
func (e *Endpoint) Pause() {
	e.mu.Lock()
	e.holding = true
	sessions := e.all()
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			if !s.pause(5 * time.Second) {
				s.close()
			}
		})
	}
	wg.Wait()
}

// Repoint sends every held connection on to target, on a connection of its
// own made as the client made its first (the client's HELLO, AUTH, CLIENT
// SETNAME... sent again), and the new connections there: a failover no
// client can see, as ElastiCache Serverless's one endpoint may hide one.
// A connection that cannot be moved is dropped.
func (e *Endpoint) Repoint(target string) {
	e.mu.Lock()
	e.target, e.holding = target, false
	sessions := e.all()
	e.mu.Unlock()
	for _, s := range sessions {
		if err := s.repoint(target); err != nil {
			s.close()
		}
	}
}

// Rewrite has every reply from now on carry to in place of from, which
// must be as long: a promoted replica's node ID shown as its old master's,
// so that not even the cluster's topology tells of a failover.
func (e *Endpoint) Rewrite(from, to string) {
	if len(from) != len(to) {
		panic("endpoint: a rewrite must keep a reply's length")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rewrite == nil {
		e.rewrite = map[string]string{}
	}
	e.rewrite[from] = to
}

// rewritten is reply as it goes to the client.
func (e *Endpoint) rewritten(reply []byte) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	for from, to := range e.rewrite {
		reply = bytes.ReplaceAll(reply, []byte(from), []byte(to))
	}
	return reply
}

// all are the sessions; e.mu is held.
func (e *Endpoint) all() []*session {
	out := make([]*session, 0, len(e.sessions))
	for s := range e.sessions {
		out = append(out, s)
	}
	return out
}

// Close stops listening and drops every connection.
func (e *Endpoint) Close() {
	e.ln.Close()
	e.Cut()
}
