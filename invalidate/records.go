package invalidate

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Batch is one batch of input records — SQS messages, SNS records, stream
// records — to invalidate: Len of them, the i-th decoded by Decode(i).
// Decode must be safe for concurrent use and must not panic; Inputs and
// Decoded give batches that keep both promises.
type Batch struct {
	Len    int
	Decode func(i int) Record
	// RetryFor is how long the keys that fail for now are retried after
	// their first failure, at most; the context's deadline may end it
	// first. 0 is until that deadline. A source that retries soon itself
	// — a queue's message back in a second, a stream's batch tried again —
	// does better with a short one: the records behind wait less, and a
	// key that cannot be deleted now holds back only its own record.
	RetryFor time.Duration
	// Attempt is how long an attempt at the batch has, all of it, when its
	// records that fail are tried again, each in an attempt of its own: a
	// record whose keys and tags cost more than the budget gives in that
	// time can never be done, and fails for good before any of its keys is
	// sent, to be parked. 0: none fails so. Either way, a record past what
	// the records before it leave until ctx's deadline fails for now,
	// unsent.
	Attempt time.Duration
}

// Inputs is the batch of inputs, each decoded by decode when Invalidate
// comes to it. decode must be safe to call concurrently, as the decoders of
// package events are; should it panic, that input's record fails for good,
// without an ID.
func Inputs[T any](inputs []T, decode func(*T) Record) Batch {
	return Batch{Len: len(inputs), Decode: func(i int) (r Record) {
		defer func() {
			if p := recover(); p != nil {
				r = Record{Err: PanicError("decoding a record", p)}
			}
		}()
		return decode(&inputs[i])
	}}
}

// Decoded is the batch of records decoded already.
func Decoded(records []Record) Batch {
	return Batch{Len: len(records), Decode: func(i int) Record { return records[i] }}
}

// decodeAll decodes the batch into records, in chunks of decodeChunk, on
// every CPU when there are several chunks. The returned ready(c) waits
// until chunk c is decoded.
func decodeAll(in Batch, records []Record) (ready func(chunk int)) {
	chunks := (len(records) + decodeChunk - 1) / decodeChunk
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if workers <= 1 {
		for i := range records {
			records[i] = in.Decode(i)
		}
		return func(int) {}
	}
	done := make([]chan struct{}, chunks)
	for c := range done {
		done[c] = make(chan struct{})
	}
	var next atomic.Int32
	for range workers {
		go func() {
			// Chunks are taken in order, so the first ones are ready first.
			for c := int(next.Add(1) - 1); c < chunks; c = int(next.Add(1) - 1) {
				for i := c * decodeChunk; i < min((c+1)*decodeChunk, len(records)); i++ {
					records[i] = in.Decode(i)
				}
				close(done[c])
			}
		}()
	}
	return func(c int) { <-done[c] }
}
