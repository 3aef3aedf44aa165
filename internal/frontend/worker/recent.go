package worker

import (
	"context"
	"sync"
	"time"
	"unsafe"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// Recent is a window of the keys a worker deleted lately, and of the tags
// it invalidated, to do them again after a reconnect. ElastiCache replicates asynchronously and
// Serverless keeps no durable log: a primary that dies takes with it the
// deletes its replica had not received, and the promoted replica serves
// the values they deleted. On Serverless a failover shows only as
// connections dropped and made again to the same endpoint, so a second
// connection to an address is what sets the re-delete off; on a node-based
// cluster a connection to a node that was not there at the start (the
// promoted replica) does too, unless told otherwise.
//
// What is deleted again is what was deleted from Window before the last
// time the cache answered: a process frozen through the failover (a Lambda
// environment between invokes) still has it when it thaws. Window must be
// at least the cache's replication lag. Recent is safe for concurrent use.
type Recent struct {
	window    time.Duration
	maxBytes  int
	newNodes  bool
	mu        sync.Mutex
	done      []done // the keys and tags done, oldest first from head
	head      int
	keyBytes  int             // the keys of done[head:] (keyBytes); with done's slots, at most maxBytes
	answered  time.Time       // when the cache last answered a delete
	dialed    map[string]bool // address: connected to it already (false: a node known from the start, not yet)
	connected bool            // the first connection is made: later ones are reconnects
	pending   bool            // a reconnect came: from is where to start again
	from      time.Time
	cause     string
	truncated bool // keys fell out of the window before their time
}

// done is a key deleted, or found absent, or a tag invalidated, at a time
// in Unix nanoseconds.
type done struct {
	key string
	at  int64
	tag bool
}

// defaultRedeleteMaxBytes bounds the window unless told otherwise: with a
// re-delete of it, what a 256 MB function has room for beside its batches
// (bench/README.md, "Memory").
const defaultRedeleteMaxBytes = 32 << 20

// keyBytes is what Go allocates for key, at most: rounded up to its size
// class, up to an eighth more.
func keyBytes(key string) int {
	n := len(key)
	return (n + n/8 + 15) &^ 15
}

// slotBytes is the size of a slot of the window.
const slotBytes = int(unsafe.Sizeof(done{}))

// NewRecent returns a window of window's length holding at most maxBytes:
// its keys and its slots, every slot of its capacity. newNodes says whether a connection to an address
// new since the start sets a re-delete off too.
func NewRecent(window time.Duration, maxBytes int, newNodes bool) *Recent {
	return &Recent{window: window, maxBytes: maxBytes, newNodes: newNodes, dialed: map[string]bool{}}
}

// remember adds to the window what a batch deleted or found absent —
// absent too: a service's own delete may have come first, and be lost with
// the same failover —, its tags' entries, and its tags: the registration
// of a fill that the failover let through shows in the tag again.
func (r *Recent) remember(rep invalidate.Report) {
	var keys, tags []string
	seen := map[string]bool{}
	for i := range rep.Results {
		for _, k := range rep.Results[i].Keys {
			if k.Status != invalidate.KeyFailed && !seen[k.Key] {
				seen[k.Key] = true
				keys = append(keys, k.Key)
			}
		}
		for _, t := range rep.Results[i].Tags {
			if seen["\x00"+t.Tag] {
				continue // its entries are in already
			}
			seen["\x00"+t.Tag] = true
			tags = append(tags, t.Tag)
			for _, e := range t.Entries {
				if !seen[e] {
					seen[e] = true
					keys = append(keys, e)
				}
			}
		}
	}
	r.add(keys, false)
	r.add(tags, true)
}

// add adds keys, or tags, that the cache answered for now.
func (r *Recent) add(keys []string, tags bool) {
	if len(keys) == 0 {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.answered = now
		if len(r.done) == cap(r.done) && r.head > 0 {
			r.compact() // rather than grow
		}
		r.done, r.keyBytes = append(r.done, done{k, now.UnixNano(), tags}), r.keyBytes+keyBytes(k)
		for r.head < len(r.done) && r.keyBytes+cap(r.done)*slotBytes > r.maxBytes {
			r.truncated = r.truncated || now.UnixNano()-r.done[r.head].at < int64(r.window)
			r.drop()
		}
	}
	// What was deleted a window before the cache last answered is on every
	// replica by now, replication lag permitting; what a re-delete asked
	// for stays until it is taken.
	for old := r.answered.Add(-r.window).UnixNano(); !r.pending && r.head < len(r.done) && r.done[r.head].at < old; {
		r.drop()
	}
	if r.head > len(r.done)/2 { // the front is spent
		r.compact()
	}
}

// drop lets go of the oldest entry; r.mu is held.
func (r *Recent) drop() {
	r.keyBytes -= keyBytes(r.done[r.head].key)
	r.done[r.head] = done{}
	r.head++
}

// compact moves the entries down to the front of their slice; r.mu is
// held.
func (r *Recent) compact() {
	n := copy(r.done, r.done[r.head:])
	clear(r.done[n:])
	r.done, r.head = r.done[:n], 0
}

// Connected notes a connection made to addr: a second one to an address,
// or one to a new address after the start when newNodes is set, asks for a
// re-delete.
func (r *Recent) Connected(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, known := r.dialed[addr]
	r.dialed[addr] = true
	switch {
	case !r.connected || (known && !seen):
	case seen:
		r.request("reconnected to " + addr)
	case r.newNodes:
		r.request("connected to a new node " + addr)
	}
}

// Started says the first connection is made, to a cluster of nodes: the
// first connection to each of them is not a reconnect, nor a new node.
func (r *Recent) Started(nodes []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connected = true
	for _, addr := range nodes {
		if _, ok := r.dialed[addr]; !ok {
			r.dialed[addr] = false
		}
	}
}

// request asks for a re-delete of what was deleted from a window before
// the cache last answered; r.mu is held.
func (r *Recent) request(cause string) {
	if r.pending || r.answered.IsZero() {
		return
	}
	r.pending, r.from, r.cause = true, r.answered.Add(-r.window), cause
}

// redelete is what a reconnect asks to delete again: keys, and the keys of
// tags.
type redelete struct {
	keys, tags []string
	cause      string
	since      time.Time
	truncated  bool // the window lost keys to its size: it holds less than asked
}

// take returns the re-delete asked for, if any, and clears the request.
func (r *Recent) take() (rd redelete, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pending {
		return rd, false
	}
	seen := [2]map[string]struct{}{{}, {}} // keys, tags
	for _, d := range r.done[r.head:] {
		if _, dup := seen[b2i(d.tag)][d.key]; d.at >= r.from.UnixNano() && !dup {
			seen[b2i(d.tag)][d.key] = struct{}{}
			if d.tag {
				rd.tags = append(rd.tags, d.key)
			} else {
				rd.keys = append(rd.keys, d.key)
			}
		}
	}
	rd.cause, rd.since, rd.truncated = r.cause, r.from, r.truncated
	r.pending, r.truncated = false, false
	return rd, true
}

// retry asks again for a re-delete that failed, from the same time.
func (r *Recent) retry(rd redelete) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pending || rd.since.Before(r.from) {
		r.pending, r.from, r.cause = true, rd.since, rd.cause
	}
}

// redeleteChunk is the most keys and tags one invalidation of a re-delete
// holds: an invalidation allocates about 600 bytes a key, and a full
// window of short keys holds hundreds of thousands.
const redeleteChunk = 5000

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// redelete deletes again, before ctx ends, what a
// reconnect asked for since the last batch; what it could not delete is
// asked for again, for the next batch. A Lambda function does it within
// the invoke that reconnected, before it may be frozen.
func (w *Worker) redelete(ctx context.Context) (n again) {
	n.cause = causeReconnect
	if w.opts.Recent == nil {
		return n
	}
	rd, ok := w.opts.Recent.take()
	if !ok || len(rd.keys)+len(rd.tags) == 0 {
		return n
	}
	tags := rd.tags
	// A chunk at a time, so that a full window costs memory in proportion
	// to a chunk. A chunk that fails for now stops it, to be asked for again
	// with the next batch; one that fails for good (NOPERM since an ACL
	// change, WRONGTYPE at a tag key) would fail the same way then: it is
	// logged, and the other chunks go on.
	var retry, lost error
	for i := 0; i < len(rd.keys)+len(tags) && retry == nil; i += redeleteChunk {
		var chunk events.Change
		if i < len(rd.keys) {
			chunk.Keys = rd.keys[i:min(i+redeleteChunk, len(rd.keys))]
		}
		if j := i + len(chunk.Keys) - len(rd.keys); j >= 0 {
			chunk.Tags = tags[min(j, len(tags)):min(j+redeleteChunk-len(chunk.Keys), len(tags))]
		}
		rep := w.inv.Invalidate(ctx, invalidate.Decoded([]invalidate.Record{{ID: "redelete", Changes: []events.Change{chunk}}}))
		w.announce(ctx, &rep, time.Now(), 0)
		res := rep.Results[0]
		n.add(&res)
		switch {
		case res.Err == nil:
		case res.Transient:
			retry = res.Err
		default:
			lost = res.Err
		}
	}
	attrs := []any{"cause", rd.cause, "since", rd.since.UTC(), "keys", len(rd.keys), "tags", len(tags), "deleted_again", n.keys, "refills", n.refills}
	if rd.truncated {
		attrs = append(attrs, "truncated", "the window was full: it held less than its length")
	}
	switch {
	case retry != nil:
		w.opts.Recent.retry(rd)
		attrs = append(attrs, "error", retry.Error(), "fate", "retry")
	case lost != nil:
		attrs = append(attrs, "error", lost.Error(), "fate", "failed for good")
	}
	w.opts.Logger.WarnContext(ctx, "keys deleted again after a reconnect: a failover may have lost deletes", attrs...)
	return n
}
