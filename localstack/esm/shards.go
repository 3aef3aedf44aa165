package esm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/invalidator-go/invalidator/internal/wait"
)

// Settings are a stream mapping's, a DynamoDB stream's or a Kinesis
// stream's; their zero values are template.yaml's defaults.
type Settings struct {
	Function Invoker
	// BatchSize is the most records per invoke. Default 1,000, the
	// template's StreamBatchSize.
	BatchSize int32
	// Latest starts a mapping that has no checkpoint at the end of the
	// stream (LATEST) instead of its oldest record (TRIM_HORIZON, the
	// template's StartingPosition).
	Latest bool
	// MaxRetryAttempts is how many times a failed record is retried before
	// it is given up: sent to OnFailure and passed. Default, and -1: no
	// limit, as the template's StreamMaximumRetryAttempts.
	MaxRetryAttempts int
	// MaxRecordAge gives up a failed record older than this. Default 6 h,
	// the template's StreamMaximumRecordAgeInSeconds; negative: none.
	MaxRecordAge time.Duration
	// NoBisect keeps a batch whole when the invoke fails; by default it is
	// split in two and retried (BisectBatchOnFunctionError).
	NoBisect bool
	// Backoff is the pause before retrying a failed batch, doubled at each
	// failure in a row up to four times itself (AWS documents no pause of
	// its own). Default 250 ms.
	Backoff time.Duration
	// Checkpoints keeps the position in each shard across restarts, as
	// Lambda does. Default none: a new mapping each time.
	Checkpoints *Checkpoints
	// OnFailure, when set, keeps each record given up on, as Lambda's
	// on-failure destination does: a Queue its coordinates, a Bucket the
	// record too.
	OnFailure Destination
	Logger    *slog.Logger
}

func (s *Settings) defaults() {
	if s.BatchSize <= 0 {
		s.BatchSize = 1000
	}
	if s.MaxRetryAttempts == 0 {
		s.MaxRetryAttempts = -1
	}
	if s.MaxRecordAge == 0 {
		s.MaxRecordAge = 6 * time.Hour
	}
	if s.Backoff <= 0 {
		s.Backoff = 250 * time.Millisecond
	}
}

// position is where a shard is read from.
type position uint8

const (
	trimHorizon position = iota
	latest
	atSequence
	afterSequence
)

// shardRecord is a record of a shard, as its stream's API gave it.
type shardRecord struct {
	seq     string
	arrival time.Time // zero when unknown
	api     any
}

// shards is what a mapping needs of a stream's API, DynamoDB Streams' or
// Kinesis's: its shards, their records, and the Lambda event and failure
// record Lambda makes of them.
type shards interface {
	// id is what the checkpoints know the stream by: one stream's, never
	// another made later under the same name.
	id() string
	list(ctx context.Context) ([]string, error)
	iterator(ctx context.Context, shard string, from position, seq string) (*string, error)
	page(ctx context.Context, iterator *string, limit int32) ([]shardRecord, *string, error)
	// event is the Lambda event of records of shard.
	event(shard string, records []shardRecord) any
	// batchInfo is the name and coordinates of a record given up on, as
	// Lambda's failure record for the stream holds them.
	batchInfo(shard string, r shardRecord) (string, map[string]any)
}

// run reads every shard of s until ctx ends.
func run(ctx context.Context, set Settings, s shards) error {
	set.defaults()
	ids, err := s.list(ctx)
	if err != nil {
		return stopped(ctx, err)
	}
	done := make(chan error, len(ids))
	for _, id := range ids {
		go func() { done <- readShard(ctx, &set, s, id) }()
	}
	var first error
	for range ids {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// readShard reads one shard: from its checkpoint, else from where the
// mapping starts; after a batch that failed, from its lowest failed
// record, after a backoff.
func readShard(ctx context.Context, m *Settings, s shards, shardID string) error {
	log := logger(m.Logger).With("mapping", "stream", "shard", shardID)
	from, after := trimHorizon, m.Checkpoints.Get(s.id(), shardID)
	switch {
	case after != "":
		from = afterSequence
	case m.Latest:
		from = latest
	}
	iterator, err := s.iterator(ctx, shardID, from, after)
	if err != nil {
		return stopped(ctx, err)
	}
	log.Info("reading the shard", "from", from, "after", after)
	limit := m.BatchSize
	attempts := map[string]int{} // failed invokes of each record
	failures := 0                // batches failed in a row
	for ctx.Err() == nil {
		records, next, err := s.page(ctx, iterator, limit)
		if err != nil {
			return stopped(ctx, fmt.Errorf("get records: %w", err))
		}
		// moto's shards never close (the next iterator is never nil): an
		// empty page means caught up.
		if len(records) == 0 {
			iterator = next
			wait.For(ctx, 200*time.Millisecond)
			continue
		}
		failed, whole := deliver(ctx, m, s, log, shardID, records)
		if ctx.Err() != nil {
			return nil
		}
		if len(failed) == 0 {
			checkpoint(m, s, log, shardID, records[len(records)-1])
			iterator, limit, failures = next, m.BatchSize, 0
			clear(attempts)
			continue
		}
		for _, i := range failed {
			attempts[records[i].seq]++
		}
		lowest := records[failed[0]]
		if failed[0] > 0 {
			checkpoint(m, s, log, shardID, records[failed[0]-1])
		}
		if why := spent(m, lowest, attempts[lowest.seq]); why != "" {
			// The lowest failed record is given up; the others keep their
			// own counts.
			giveUp(ctx, m, s, log, shardID, lowest, why, attempts[lowest.seq])
			checkpoint(m, s, log, shardID, lowest)
			delete(attempts, lowest.seq)
			if iterator, err = s.iterator(ctx, shardID, afterSequence, lowest.seq); err != nil {
				return stopped(ctx, err)
			}
			continue
		}
		if whole && !m.NoBisect {
			limit = max(1, int32(len(records))/2)
		}
		failures++
		pause := min(m.Backoff<<min(failures-1, 2), 4*m.Backoff)
		log.Info("retrying from the lowest failed record", "sequence", lowest.seq, "attempt", attempts[lowest.seq]+1,
			"records", limit, "in_ms", pause.Milliseconds())
		wait.For(ctx, pause)
		if iterator, err = s.iterator(ctx, shardID, atSequence, lowest.seq); err != nil {
			return stopped(ctx, err)
		}
	}
	return nil
}

func (p position) String() string {
	return [...]string{"TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"}[p]
}

// spent says why a record that failed attempts times is given up, or ""
// when it is retried.
func spent(m *Settings, r shardRecord, attempts int) string {
	if m.MaxRetryAttempts >= 0 && attempts > m.MaxRetryAttempts {
		return "RetryAttemptsExhausted"
	}
	if m.MaxRecordAge > 0 && !r.arrival.IsZero() && time.Since(r.arrival) > m.MaxRecordAge {
		return "RecordAgeExceeded"
	}
	return ""
}

func checkpoint(m *Settings, s shards, log *slog.Logger, shardID string, r shardRecord) {
	if err := m.Checkpoints.Set(s.id(), shardID, r.seq); err != nil {
		log.Warn("cannot save the checkpoint", "error", err.Error())
	}
}

// deliver invokes the function with records and returns the indices of the
// failed ones in stream order (Lambda restarts from the first, the lowest),
// and whether the invoke failed as a whole.
func deliver(ctx context.Context, m *Settings, s shards, log *slog.Logger, shard string, records []shardRecord) (failed []int, whole bool) {
	out, err := m.Function.Invoke(ctx, s.event(shard, records))
	var reported map[string]bool
	if err == nil {
		reported, err = answer(out)
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("invoke failed: the batch will be retried", "records", len(records), "error", err.Error())
		}
	} else {
		log.Info("batch delivered", "records", len(records), "failed", len(reported))
	}
	for i, r := range records {
		if err != nil || reported[r.seq] {
			failed = append(failed, i)
		}
	}
	return failed, err != nil
}

// giveUp sends a record given up on to the on-failure destination, shaped
// like Lambda's stream failure records, with the event that invoked it.
func giveUp(ctx context.Context, m *Settings, s shards, log *slog.Logger, shardID string, r shardRecord, why string, attempts int) {
	log.Warn("record given up: it goes to the on-failure destination", "sequence", r.seq, "condition", why)
	if m.OnFailure == nil {
		return
	}
	name, info := s.batchInfo(shardID, r)
	record := map[string]any{
		"version": "1.0", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"requestContext": map[string]any{"condition": why, "approximateInvokeCount": attempts},
		name:             info,
	}
	event, err := json.Marshal(s.event(shardID, []shardRecord{r}))
	if err == nil {
		err = m.OnFailure.Keep(ctx, shardID, record, event)
	}
	if err != nil {
		log.Error("cannot reach the on-failure destination", "error", err.Error())
	}
}

// answer reads a stream function's answer: the sequence numbers it
// reported failed.
func answer(out []byte) (map[string]bool, error) {
	var resp struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, err
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

// coordinates are a record given up on, as Lambda's failure record for a
// stream holds them.
func coordinates(stream, shard string, r shardRecord) map[string]any {
	arrival := r.arrival.UTC().Format(time.RFC3339Nano)
	return map[string]any{
		"shardId": shard, "startSequenceNumber": r.seq, "endSequenceNumber": r.seq, "streamArn": stream, "batchSize": 1,
		"approximateArrivalOfFirstRecord": arrival, "approximateArrivalOfLastRecord": arrival,
	}
}
