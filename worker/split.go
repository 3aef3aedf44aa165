package worker

import (
	"errors"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// joinSplit decodes a Kinesis batch whole, so that each Aurora DSQL record
// whose row came in fragments is planned from the fragments in the batch
// (events.Unjoined.Join). The fragments of other batches are not waited
// for: another shard's batch may hold them, or come after this one is
// answered; such a record fails for good, to be parked with its reason.
func joinSplit(batch invalidate.Batch, records []record) invalidate.Batch {
	decoded := make([]invalidate.Record, batch.Len)
	split := false
	for i := range decoded {
		decoded[i] = batch.Decode(i)
		split = split || errors.As(decoded[i].Err, new(*events.Unjoined))
	}
	if !split {
		return invalidate.Decoded(decoded)
	}
	fragments := map[string][]events.Fragment{}
	for i := range records {
		if f, ok := events.FragmentOf(records[i].delivery); ok {
			fragments[f.Chunk] = append(fragments[f.Chunk], f)
		}
	}
	// Joined as each record is planned, so that a panic fails its record
	// alone, as a decoder's does.
	return invalidate.Inputs(decoded, func(r *invalidate.Record) invalidate.Record {
		if u := (*events.Unjoined)(nil); errors.As(r.Err, &u) {
			r.Changes, r.Err = u.Join(fragments)
		}
		return *r
	})
}
