package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// signs gathers what shows this process a failover — wherever a sign
// exists, as none is sure to: a connection made again to an address (on
// ElastiCache Serverless, whose one endpoint hides its nodes, often the only
// sign), or to an address new since the start; a reply only a node in a
// failover gives (cacheerr.Failover: READONLY, MASTERDOWN, LOADING); the
// cluster's topology naming another primary for some slots, which a
// process frozen through the failover, or one that follows MOVED to a node
// it knew as a replica, sees and nothing else does. The first sign not yet
// acted on waits in pending, as a pass over the window, until the batch's
// end takes it (Worker.afterSign). signs is safe for concurrent use.
type signs struct {
	mu        sync.Mutex
	dialed    map[string]bool // address: connected to it already (false: a node known from the start, not yet)
	connected bool            // the first connection is made: later ones are reconnects
	pending   *pass           // a sign's pass, not yet begun or to go on with
	follow    *pass           // the pass that follows the last one a sign began
	replicas  map[string]bool // the node IDs the topology last showed as replicas
	checked   time.Time       // when it was last asked for
}

// pass is a reading of the failover window, all of it, over one batch's
// turn or several, for a sign: the messages it read, to read each once;
// and for the pass that follows a sign's, when it is due. A sign may come
// before the promotion — a connection cut while the old primary still
// takes deletes, which it then loses —: what a pass reads then is hidden
// windowHide, and the pass that follows, due that long after it, reads it
// all again, after the promotion.
type pass struct {
	cause    string
	followUp bool
	due      time.Time
	seen     map[string]bool // message IDs
	// The slot it began in, once it has, and how many slots before it it
	// has read to the end.
	begun       bool
	first, back int
}

// maxPassMessages is the most messages a pass reads: 5 MiB of their IDs.
// A window of more (over 1,600 batches a second in the fleet) is deleted
// again, beyond it, by the failover schedule.
const maxPassMessages = 100_000

func newSigns() *signs { return &signs{dialed: map[string]bool{}} }

// started says the first connection is made, to a cluster of nodes: the
// first connection to each of them is not a reconnect, nor a new node.
func (s *signs) started(nodes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connected = true
	for _, addr := range nodes {
		if _, ok := s.dialed[addr]; !ok {
			s.dialed[addr] = false
		}
	}
}

// connectedTo notes a connection made to addr: a second one to an
// address, or one to an address new since the start, is a sign.
func (s *signs) connectedTo(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, known := s.dialed[addr]
	s.dialed[addr] = true
	switch {
	case !s.connected || (known && !seen):
	case seen:
		s.raise("reconnected to " + addr)
	default:
		s.raise("connected to a new node " + addr)
	}
}

// replied notes the errors of a command: a reply of a node in a failover
// is a sign.
func (s *signs) replied(errs ...error) {
	for _, err := range errs {
		if cacheerr.Failover(err) {
			s.mu.Lock()
			s.raise("the cache replied " + firstWord(err.Error()))
			s.mu.Unlock()
			return
		}
	}
}

func firstWord(s string) string {
	word, _, _ := strings.Cut(s, " ")
	return word
}

// raise keeps cause, as a pass to begin; a pass pending already, kept to
// go on with, goes on from the newest slot, where this sign's lost deletes
// are and which it may have read, and is followed by another, for what it
// deleted again before this sign's promotion. s.mu is held.
func (s *signs) raise(cause string) {
	switch p := s.pending; {
	case p == nil:
		s.pending = &pass{cause: cause, seen: map[string]bool{}}
	case p.begun:
		p.cause, p.followUp, p.begun, p.back = cause, false, false, 0
	}
}

// take returns the pending pass, or else the following one once it is
// due, and clears it; nil when there is none.
func (s *signs) take(now time.Time) *pass {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	switch {
	case p != nil:
		s.pending = nil
	case s.follow != nil && !now.Before(s.follow.due):
		p, s.follow = s.follow, nil
	}
	return p
}

// again keeps a pass that did not finish, for the next batch, unless a new
// sign is pending: its pass reads the window anew.
func (s *signs) again(p *pass) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = p
	}
}

// followAfter makes the pass that follows p's, windowHide after now, the
// one to come: a later sign's replaces an earlier's, whose messages show
// again before it is due. A follow-up has none.
func (s *signs) followAfter(p *pass, now time.Time) {
	if p.followUp {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follow = &pass{cause: p.cause, followUp: true, due: now.Add(windowHide), seen: map[string]bool{}}
}

// topologyEvery is how often a process asks the cluster for its topology,
// at most, at the end of a batch: a command of about 1 ECPU a second per
// busy process, for a sign within a second of a promotion.
const topologyEvery = time.Second

// checkTopology asks the cluster which nodes are primaries, unless it
// asked less than topologyEvery ago, and raises a sign when a node it saw
// as a replica is one now: a promotion. Slots moving between primaries, or
// a new primary, lose nothing and are no sign. Errors are ignored: a cache
// that does not answer shows its failover otherwise, or on the next ask.
func (s *signs) checkTopology(ctx context.Context, client valkey.Client) {
	s.mu.Lock()
	if time.Since(s.checked) < topologyEvery {
		s.mu.Unlock()
		return
	}
	s.checked = time.Now()
	s.mu.Unlock()
	// Waited for until ctx ends, whatever the client does: with every node
	// frozen, a CI run saw the call last 4 s past its context's 1 s, and
	// the invoke answer after its deadline.
	type answer struct {
		shards []valkey.ValkeyMessage
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		shards, err := client.Do(ctx, client.B().ClusterShards().Build()).ToArray()
		answered <- answer{shards, err}
	}()
	var shards []valkey.ValkeyMessage
	select {
	case a := <-answered:
		if a.err != nil {
			return
		}
		shards = a.shards
	case <-ctx.Done():
		return
	}
	roles, ok := nodeRoles(shards)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, primary := range roles {
		if primary && s.replicas[id] {
			s.raise(fmt.Sprintf("the cluster's topology shows replica %.12s promoted", id))
		}
	}
	s.replicas = map[string]bool{}
	for id, primary := range roles {
		if !primary {
			s.replicas[id] = true
		}
	}
}

// nodeRoles reads CLUSTER SHARDS' reply: each node's ID, and whether it
// is a primary; false when the reply has no such shape. A node marked
// failed is left out: a dead primary stays listed until forgotten.
func nodeRoles(shards []valkey.ValkeyMessage) (map[string]bool, bool) {
	roles := map[string]bool{}
	for _, shard := range shards {
		fields, err := shard.AsMap()
		if err != nil {
			return nil, false
		}
		nodesField := fields["nodes"]
		nodes, err := nodesField.ToArray()
		if err != nil {
			return nil, false
		}
		for _, node := range nodes {
			n, err := node.AsMap()
			if err != nil {
				return nil, false
			}
			idField, roleField, healthField := n["id"], n["role"], n["health"]
			id, err := idField.ToString()
			if err != nil {
				return nil, false
			}
			role, _ := roleField.ToString()
			if health, _ := healthField.ToString(); health == "failed" {
				continue
			}
			roles[id] = role == "master"
		}
	}
	return roles, len(roles) > 0
}
