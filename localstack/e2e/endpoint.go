package main

import (
	"io"
	"net"
	"sync"
	"time"
)

// endpoint is one address in front of a shard's master and its replica,
// which both announce it (CACHE_ANNOUNCE): new connections go to whichever
// is the master. That is how ElastiCache Serverless shows a failover to a
// client — connections dropped, and made again to the same endpoint — and
// not as the node-based cluster's new node address.
type endpoint struct {
	ln     net.Listener
	mu     sync.Mutex
	target string // the master's own address; empty: connections are refused
	conns  map[net.Conn]bool
}

func listenEndpoint(addr, target string) (*endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	e := &endpoint{ln: ln, target: target, conns: map[net.Conn]bool{}}
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
// side closes.
func (e *endpoint) pipe(c net.Conn) {
	e.mu.Lock()
	target := e.target
	e.mu.Unlock()
	if target == "" {
		c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", target, time.Second)
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
		_, _ = io.Copy(up, c)
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
