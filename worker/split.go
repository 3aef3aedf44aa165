package worker

import (
	"errors"
	"sync"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// joinSplit plans each Aurora DSQL record of a Kinesis batch whose row came
// in fragments (events.Unjoined) from the fragments in the batch, read
// once, when the first such record is decoded: a batch without one is
// decoded as any other. The fragments of other batches are not waited
// for: another shard's batch may hold them, or come after this one is
// answered; such a record fails for good, to be parked with its reason.
func joinSplit(batch invalidate.Batch, raws [][]byte) invalidate.Batch {
	// Read once; should reading panic, each record that needs it fails so.
	fragments := sync.OnceValue(func() *events.Fragments {
		fs := &events.Fragments{}
		for _, raw := range raws {
			if f, ok := events.FragmentOf(raw); ok {
				fs.Add(f)
			}
		}
		return fs
	})
	decode := batch.Decode
	batch.Decode = func(i int) (r invalidate.Record) {
		r = decode(i)
		u := (*events.Unjoined)(nil)
		if !errors.As(r.Err, &u) {
			return r
		}
		defer func() {
			if p := recover(); p != nil { // failing its record alone, as a decoder's does
				r.Changes, r.Err = nil, invalidate.PanicError("joining a record", p)
			}
		}()
		r.Changes, r.Err = u.Join(fragments())
		return r
	}
	return batch
}
