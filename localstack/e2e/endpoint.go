package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// endpoint is one address in front of a shard's master and its replica,
// which both announce it (CACHE_ANNOUNCE): new connections go to whichever
// is the master. That is how ElastiCache Serverless shows a failover to a
// client — connections dropped, and made again to the same endpoint — and
// not as the node-based cluster's new node address. It ends the clients'
// TLS and reads their commands, so that it can throttle them as
// ElastiCache does above the cache's ECPU limit (throttle.go).
type endpoint struct {
	ln       net.Listener
	server   *tls.Config // as the stack's nodes, by their certificate
	upstream *tls.Config
	mu       sync.Mutex
	target   string // the master's own address; empty: connections are refused
	conns    map[net.Conn]bool
	limit    *limit // nil: nothing is throttled
}

// listenEndpoint listens on addr for target, with the TLS files of the
// stack under dir (ca.crt, server.crt, server.key).
func listenEndpoint(addr, target, dir string) (*endpoint, error) {
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
	e := &endpoint{ln: ln, target: target, conns: map[net.Conn]bool{},
		server: &tls.Config{Certificates: []tls.Certificate{cert}}, upstream: &tls.Config{RootCAs: roots, ServerName: "localhost"}}
	go e.serve()
	return e, nil
}

func (e *endpoint) serve() {
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		go e.pipe(c)
	}
}

// pipe copies between a client and the master, both ways, until either
// side closes: replies as they come, commands one by one, each throttled
// or not.
func (e *endpoint) pipe(raw net.Conn) {
	e.mu.Lock()
	target := e.target
	e.mu.Unlock()
	if target == "" {
		raw.Close()
		return
	}
	c := tls.Server(raw, e.server)
	up, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", target, e.upstream)
	if err != nil {
		c.Close()
		return
	}
	e.mu.Lock()
	if e.target != target { // cut meanwhile
		e.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	e.conns[c], e.conns[up] = true, true
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_ = e.commands(bufio.NewReader(c), up)
		up.Close()
		close(done)
	}()
	_, _ = io.Copy(c, up)
	c.Close()
	<-done
	e.mu.Lock()
	delete(e.conns, c)
	delete(e.conns, up)
	e.mu.Unlock()
}

// cut drops every connection, and refuses new ones until follow: from now
// on the master gets nothing more.
func (e *endpoint) cut() { e.follow("") }

// follow drops every connection and sends the new ones to target.
func (e *endpoint) follow(target string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.target = target
	for c := range e.conns {
		c.Close()
	}
}

func (e *endpoint) close() {
	e.ln.Close()
	e.cut()
}
