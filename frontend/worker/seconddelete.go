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

// SecondDeleter deletes keys a second time, later, and invalidates tags
// again: a fill that read the source before a change, and landed after
// its invalidation — a loader reading a replica, a cache-aside recipe
// without a lease — is deleted then. DelayQueue is one.
type SecondDeleter interface {
	// Schedule schedules keys and tags and returns those it could not.
	Schedule(ctx context.Context, keys, tags []string) (failedKeys, failedTags []string)
}

// DelayQueue schedules second deletes as change messages
// ({"keys":[...],"secondDelete":true}, or "tags") in an SQS queue, each
// hidden for Delay, that the SQS function or the poller consumes: they
// survive the process that sent them. A change marked secondDelete is
// deleted and never delayed again.
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

// again is one second-delete message: keys, or tags.
type again struct {
	Keys         []string `json:"keys,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	SecondDelete bool     `json:"secondDelete"`
}

// Schedule is SecondDeleter's: one message per chunk of keys or of tags,
// sent ten at a time.
func (q DelayQueue) Schedule(ctx context.Context, keys, tags []string) (failedKeys, failedTags []string) {
	delay := int32(min(max((q.Delay+time.Second-1)/time.Second, 1), 900))
	var msgs []again
	for _, chunk := range chunkKeys(keys) {
		msgs = append(msgs, again{Keys: chunk, SecondDelete: true})
	}
	for _, chunk := range chunkKeys(tags) {
		msgs = append(msgs, again{Tags: chunk, SecondDelete: true})
	}
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 10)
	for i, msg := range msgs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			body, err := json.Marshal(msg)
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
			failedKeys, failedTags = append(failedKeys, msgs[i].Keys...), append(failedTags, msgs[i].Tags...)
		}
	}
	return failedKeys, failedTags
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

// secondDeletes counts a batch's second deletes, in distinct keys and
// tags.
type secondDeletes struct {
	scheduled     int // keys sent to be deleted again
	tagsScheduled int // tags sent to be invalidated again
	keys          int // keys of second deletes deleted now
	tags          int // tags of second deletes invalidated now
	present       int // of their keys, those there again, and their tags' entries: refills caught
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

// scheduleSecondDeletes schedules the keys and tags of the records done,
// but for second deletes themselves, and fails for now the records whose
// keys or tags could not be scheduled.
func (w *Worker) scheduleSecondDeletes(ctx context.Context, rep *invalidate.Report, again []bool) (n secondDeletes) {
	var keys, tags owned
	seen := map[string]bool{} // a key or tag two second deletes share counts once
	for i, res := range rep.Results {
		if again[i] {
			for _, k := range res.Keys {
				if !seen[k.Key] {
					seen[k.Key] = true
					n.keys++
					if k.Status == invalidate.KeyDeleted {
						n.present++
					}
				}
			}
			for _, t := range res.Tags {
				if !seen["\x00"+t.Tag] {
					seen["\x00"+t.Tag] = true
					n.tags++
					n.present += t.Deleted
				}
			}
			continue
		}
		if res.Err != nil || w.opts.SecondDelete == nil {
			continue
		}
		for _, k := range res.Keys {
			keys.add(k.Key, i)
		}
		for _, t := range res.Tags {
			tags.add(t.Tag, i)
		}
	}
	if len(keys.names)+len(tags.names) == 0 {
		return n
	}
	failedKeys, failedTags := w.opts.SecondDelete.Schedule(ctx, keys.names, tags.names)
	n.scheduled, n.tagsScheduled = len(keys.names)-len(failedKeys), len(tags.names)-len(failedTags)
	for _, failed := range []struct {
		names []string
		by    owned
	}{{failedKeys, keys}, {failedTags, tags}} {
		for _, name := range failed.names {
			for _, i := range failed.by.records[name] {
				if res := &rep.Results[i]; res.Err == nil {
					res.Err, res.Transient = ErrSecondDelete, true
					rep.Metrics.Failed++
					rep.Metrics.Transient++
				}
			}
		}
	}
	return n
}

// owned are distinct keys or tags, and the records of each.
type owned struct {
	names   []string
	records map[string][]int
}

func (o *owned) add(name string, record int) {
	if o.records == nil {
		o.records = map[string][]int{}
	}
	if o.records[name] == nil {
		o.names = append(o.names, name)
	}
	o.records[name] = append(o.records[name], record)
}
