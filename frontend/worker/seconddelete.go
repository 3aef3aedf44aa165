package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/frontend/parking"
	"github.com/invalidator-go/invalidator/invalidate"
)

// SecondDeleter deletes keys a second time, later: a fill that read the
// source before a change, and landed after its invalidation — a loader
// reading a replica, a cache-aside recipe without a lease — is deleted then.
// DelayQueue is one.
type SecondDeleter interface {
	// Schedule schedules keys and returns those it could not.
	Schedule(ctx context.Context, keys []string) (failed []string)
}

// DelayQueue schedules second deletes as change messages
// ({"keys":[...],"secondDelete":true}) in an SQS queue, each hidden for
// Delay, that the SQS function or the poller consumes: they survive the
// process that sent them. A change marked secondDelete is deleted and never
// delayed again.
type DelayQueue struct {
	Client parking.SQS
	URL    string
	// Delay is how long after the first delete the second comes: longer
	// than the slowest load plus the replica lag. SQS counts it in whole
	// seconds, from 1 to 900.
	Delay time.Duration
}

// The size of a second-delete message: well within SQS's 256 KiB, and as
// many keys as one UNLINK chunk of the invalidator.
const (
	maxDelayKeys  = 500
	maxDelayBytes = 192 << 10
)

// ErrSecondDelete fails a record whose second delete could not be
// scheduled: it is retried, and never acknowledged without it.
var ErrSecondDelete = errors.New("second delete not scheduled")

// Schedule is SecondDeleter's: one message per chunk of keys, sent ten at a
// time.
func (q DelayQueue) Schedule(ctx context.Context, keys []string) (failed []string) {
	delay := int32(min(max((q.Delay+time.Second-1)/time.Second, 1), 900))
	chunks := chunkKeys(keys)
	errs := make([]error, len(chunks))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 10)
	for i, chunk := range chunks {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			body, err := json.Marshal(struct {
				Keys         []string `json:"keys"`
				SecondDelete bool     `json:"secondDelete"`
			}{chunk, true})
			if err == nil {
				_, err = q.Client.SendMessage(ctx, &sqs.SendMessageInput{
					QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(body)), DelaySeconds: delay,
				})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			failed = append(failed, chunks[i]...)
		}
	}
	return failed
}

// chunkKeys splits keys into messages of at most maxDelayKeys keys and
// about maxDelayBytes.
func chunkKeys(keys []string) [][]string {
	var chunks [][]string
	start, size := 0, 0
	for i, k := range keys {
		if i > start && (i-start == maxDelayKeys || size+len(k) > maxDelayBytes) {
			chunks = append(chunks, keys[start:i])
			start, size = i, 0
		}
		size += len(k) + 4 // quotes, comma, room for escapes
	}
	if start < len(keys) {
		chunks = append(chunks, keys[start:])
	}
	return chunks
}

// secondDeletes counts a batch's second deletes, in distinct keys.
type secondDeletes struct {
	scheduled int // keys sent to be deleted again
	keys      int // keys of second deletes deleted now
	present   int // of which were there again: refills caught
}

// markSecondDeletes wraps batch's decoder to note which records are second
// deletes, in again.
func markSecondDeletes(batch invalidate.Batch, again []bool) invalidate.Batch {
	decode := batch.Decode
	batch.Decode = func(i int) invalidate.Record {
		r := decode(i)
		again[i] = len(r.Changes) > 0
		for _, c := range r.Changes {
			again[i] = again[i] && c.SecondDelete
		}
		return r
	}
	return batch
}

// scheduleSecondDeletes schedules the keys of the records done, but for
// second deletes themselves, and fails for now the records whose keys could
// not be scheduled.
func (w *Worker) scheduleSecondDeletes(ctx context.Context, rep *invalidate.Report, again []bool) (n secondDeletes) {
	owners := map[string][]int{}
	var keys []string
	seen := map[string]bool{} // a key two second deletes share counts once
	for i, res := range rep.Results {
		if again[i] {
			for _, k := range res.Keys {
				if seen[k.Key] {
					continue
				}
				seen[k.Key] = true
				n.keys++
				if k.Status == invalidate.KeyDeleted {
					n.present++
				}
			}
			continue
		}
		if res.Err != nil || w.opts.SecondDelete == nil {
			continue
		}
		for _, k := range res.Keys {
			if owners[k.Key] == nil {
				keys = append(keys, k.Key)
			}
			owners[k.Key] = append(owners[k.Key], i)
		}
	}
	if len(keys) == 0 {
		return n
	}
	failed := w.opts.SecondDelete.Schedule(ctx, keys)
	n.scheduled = len(keys) - len(failed)
	for _, k := range failed {
		for _, i := range owners[k] {
			if res := &rep.Results[i]; res.Err == nil {
				res.Err, res.Transient = ErrSecondDelete, true
				rep.Metrics.Failed++
				rep.Metrics.Transient++
			}
		}
	}
	return n
}
