package invalidate

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
)

// Member is an entry registered in a tag: its key, and its registration.
type Member struct{ Key, Registration string }

// tagOutcome is what became of one tag of a batch.
type tagOutcome struct {
	deleted, absent int      // entries
	entries         []string // the keys of those, as far as the batch's budget goes
	incomplete      bool     // entries left out of entries
	err             error    // nil when every entry was deleted or absent
}

// maxEntryBytes bounds the keys of the tags' entries a report carries, for
// the worker to announce and remember: a tag may hold millions. Past it, a
// tag's result says it is incomplete.
const maxEntryBytes = 8 << 20

// invalidateTags invalidates the batch's tags, Parallel at a time, before
// ctx ends; what fails for now is retried, as keys are, until retries
// ends: the batch's window, shared with its keys.
func (inv *Invalidator) invalidateTags(ctx, retries context.Context, b *batch) {
	if len(b.tags) == 0 {
		return
	}
	b.tagOut = make([]tagOutcome, len(b.tags))
	fail := func(err error) {
		for i := range b.tagOut {
			b.tagOut[i].err = err
		}
	}
	var reading int64
	clock := inv.opts.Rules.TagClock()
	inv.pace.spend(tickCost(clock).ecpus)
	b.count(tickCost(clock))
	if err := inv.attempt(ctx, retries, b, func(ctx context.Context) (err error) {
		reading, err = inv.cache.Tick(ctx, clock)
		return err
	}); err != nil {
		fail(err)
		return
	}
	slots := make(chan struct{}, inv.opts.Parallel)
	var wg sync.WaitGroup
	for i, tag := range b.tags {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() {
				<-slots
				if p := recover(); p != nil { // a bug fails its tag, not the process
					b.tagOut[i] = tagOutcome{err: PanicError("invalidating a tag", p)}
				}
			}()
			prio := max(b.tagPrio[i], tagPages) // a first delete's tag is paged after keys
			b.tagOut[i] = inv.invalidateTag(ctx, retries, b, inv.opts.Rules.TagKey(tag), reading, prio)
		})
	}
	wg.Wait()
}

// invalidateTag deletes the entries of the tag at key a page at a time,
// each page's as keys are deleted, then forgets them. It stops at the
// first page with an entry that could not be deleted for now, which stays
// registered: the tag is read again when its record is retried, and the
// pages done stay done. An entry refused for good stays registered too,
// for the record's replay, and the pages after it are read. Each page
// waits for the budget at prio; what it cost is counted once answered.
func (inv *Invalidator) invalidateTag(ctx, retries context.Context, b *batch, key string, reading int64, prio priority) (out tagOutcome) {
	asked := pageGuess(key, reading, inv.opts.TagPage) // then each page what the last cost
	for cursor := uint64(0); ; {
		var members []Member
		var next uint64
		if err := inv.pace.take(ctx, prio, asked); err != nil {
			out.err = worse(err, out.err)
			return out
		}
		err := inv.attempt(ctx, retries, b, func(ctx context.Context) (err error) {
			members, next, err = inv.cache.Page(ctx, key, reading, cursor, inv.opts.TagPage)
			return err
		})
		c := pageCost(key, reading, cursor, inv.opts.TagPage, members, next)
		inv.pace.spend(c.ecpus - asked)
		asked = c.ecpus
		b.count(c)
		if err != nil {
			out.err = worse(err, out.err)
			return out
		}
		// An entry outside allowedKeys given in the rules is not deleted, as
		// a planned key would not be: it stays registered, and fails the
		// record for good. Patterns derived from the templates say nothing
		// of the keys services register in tags, which the cache user's
		// patterns bound.
		allowed := members[:0]
		a := inv.opts.Rules.allowed
		for _, m := range members {
			if a.derived || a.permits(m.Key) {
				allowed = append(allowed, m)
			} else {
				out.err = worse(out.err, &planError{Reason: "tag entry " + strconv.Quote(truncateKey(m.Key)) + " is outside the allowed keys " + strings.Join(a.patterns, " ")})
			}
		}
		members = allowed
		page := &batch{keys: make([]string, len(members)), prio: make([]priority, len(members)), status: make([]KeyStatus, len(members)), errs: make([]error, len(members))}
		for i, m := range members {
			page.keys[i], page.prio[i] = m.Key, prio
		}
		f := inv.flight(ctx, b)
		for start := 0; start < len(page.keys); start += inv.opts.Chunk {
			f.send(page.keys[start:min(start+inv.opts.Chunk, len(page.keys))], int32(start), nil, prio)
		}
		inv.retry(retries, page, f.settle(page))
		done := members[:0]
		for i, st := range page.status {
			switch st {
			case KeyDeleted:
				out.deleted++
			case KeyAbsent:
				out.absent++
			default:
				out.err = worse(out.err, cmp.Or(page.errs[i], errNotAttempted))
				continue
			}
			done = append(done, members[i])
			if n := int64(len(members[i].Key)); !out.incomplete && b.entryBytes.Add(n) <= maxEntryBytes {
				out.entries = append(out.entries, members[i].Key)
			} else {
				out.incomplete = true
			}
		}
		if len(done) > 0 {
			c := forgetCost(key, done)
			err := inv.pace.take(ctx, prio, c.ecpus)
			if err == nil {
				b.count(c)
				err = inv.attempt(ctx, retries, b, func(ctx context.Context) error { return inv.cache.Forget(ctx, key, done) })
			}
			out.err = worse(out.err, err)
		}
		// A failure for now stops here: the tag is read again on retry. One
		// for good (an entry refused to the user, or of the wrong type)
		// does not keep the rest of the tag, which no retry would reach,
		// stale.
		if out.err != nil && !permanentKeyError(out.err) || next == 0 {
			return out
		}
		cursor = next
	}
}

// worse is the error that decides what becomes of a tag's record: one that
// may pass, so that it is retried first, else the first one.
func worse(err, other error) error {
	if err == nil || other != nil && permanentKeyError(err) && !permanentKeyError(other) {
		return other
	}
	return err
}

// attempt runs fn, each try within AttemptTimeout, and again with backoff
// while it fails for now, until retries ends or its deadline is too near
// for the next pause: once at least, even when the batch's retries are
// over. It counts the throttling replies in b.
func (inv *Invalidator) attempt(ctx, retries context.Context, b *batch, fn func(context.Context) error) error {
	try := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, inv.opts.AttemptTimeout)
		defer cancel()
		err := fn(ctx)
		if cacheerr.Throttled(err) {
			inv.pace.throttled()
			b.throttled.Add(1)
		}
		return err
	}
	err := try(ctx)
	if err == nil || permanentKeyError(err) {
		return err
	}
	for attempt := 1; inv.pause(retries, attempt); attempt++ {
		if err = lastError(try(retries), err); err == nil || permanentKeyError(err) {
			return err
		}
	}
	return err
}

// tagResults gives the result of record r the outcomes of its tags, held in
// tags, and the error of the first that failed — one that failed for now,
// if any, unless a key did.
func (b *batch) tagResults(r int, res *Result, tags []TagResult) {
	start := int32(0)
	if r > 0 {
		start = b.recTagEnd[r-1]
	}
	res.Tags = tags[start:b.recTagEnd[r]:b.recTagEnd[r]]
	var tagErr error
	for i, t := range b.recTags[start:b.recTagEnd[r]] {
		o := b.tagOut[t]
		res.Tags[i] = TagResult{Tag: b.tags[t], Deleted: o.deleted, Absent: o.absent, Entries: o.entries, Incomplete: o.incomplete, Err: o.err}
		if o.err != nil && worse(tagErr, o.err) != tagErr {
			tagErr = &tagError{Tag: b.tags[t], Err: o.err}
		}
	}
	if tagErr == nil {
		return
	}
	transient := !permanentKeyError(tagErr)
	if res.Err == nil || transient && !res.Transient {
		res.Err = tagErr
	}
	res.Transient = res.Transient || transient
}
