package esm

import (
	"context"
	"encoding/json"
	"fmt"
	lambdaevents "github.com/aws/aws-lambda-go/events"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/worker/streams"
)

// StreamMapping feeds a DynamoDB stream to a function, as Lambda's stream
// event source mapping with ReportBatchItemFailures does. Its zero settings
// are template.yaml's defaults.
type StreamMapping struct {
	Client    *dynamodbstreams.Client
	StreamARN string
	Function  Invoker
	// BatchSize is the most records per invoke. Default 1,000, the
	// template's StreamBatchSize and the most GetRecords returns.
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
	// OnFailure, when set, receives the coordinates of each record given up
	// on, as Lambda's on-failure destination does: not the record itself.
	OnFailure *sqs.Client
	DLQURL    string
	Logger    *slog.Logger
}

func (m *StreamMapping) defaults() {
	if m.BatchSize <= 0 {
		m.BatchSize = 1000
	}
	if m.MaxRetryAttempts == 0 {
		m.MaxRetryAttempts = -1
	}
	if m.MaxRecordAge == 0 {
		m.MaxRecordAge = 6 * time.Hour
	}
	if m.Backoff <= 0 {
		m.Backoff = 250 * time.Millisecond
	}
}

// Run reads the stream's shards until ctx ends.
func (m *StreamMapping) Run(ctx context.Context) error {
	m.defaults()
	desc, err := m.Client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(m.StreamARN)})
	if err != nil {
		return stopped(ctx, err)
	}
	done := make(chan error, len(desc.StreamDescription.Shards))
	for _, shard := range desc.StreamDescription.Shards {
		go func() { done <- m.shard(ctx, aws.ToString(shard.ShardId)) }()
	}
	var first error
	for range desc.StreamDescription.Shards {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// shard reads one shard: from its checkpoint, else from where the mapping
// starts; after a batch that failed, from its lowest failed record, after
// a backoff.
func (m *StreamMapping) shard(ctx context.Context, shardID string) error {
	log := logger(m.Logger).With("mapping", "stream", "shard", shardID)
	position, after := types.ShardIteratorTypeTrimHorizon, m.Checkpoints.Get(m.StreamARN, shardID)
	switch {
	case after != "":
		position = types.ShardIteratorTypeAfterSequenceNumber
	case m.Latest:
		position = types.ShardIteratorTypeLatest
	}
	iterator, err := streams.Iterator(ctx, m.Client, m.StreamARN, shardID, position, after)
	if err != nil {
		return stopped(ctx, err)
	}
	log.Info("reading the shard", "from", string(position), "after", after)
	limit := m.BatchSize
	attempts := map[string]int{} // failed invokes of each record
	failures := 0                // batches failed in a row
	for ctx.Err() == nil {
		page, err := m.Client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(limit)})
		if err != nil {
			return stopped(ctx, fmt.Errorf("get records: %w", err))
		}
		// moto's shards never close (NextShardIterator is never nil): an
		// empty page means caught up.
		if len(page.Records) == 0 {
			iterator = page.NextShardIterator
			wait.For(ctx, 200*time.Millisecond)
			continue
		}
		failed, whole := m.deliver(ctx, log, page.Records)
		if ctx.Err() != nil {
			return nil
		}
		if len(failed) == 0 {
			m.checkpoint(log, shardID, page.Records[len(page.Records)-1])
			iterator, limit, failures = page.NextShardIterator, m.BatchSize, 0
			clear(attempts)
			continue
		}
		for _, i := range failed {
			attempts[seq(page.Records[i])]++
		}
		lowest := page.Records[failed[0]]
		if failed[0] > 0 {
			m.checkpoint(log, shardID, page.Records[failed[0]-1])
		}
		if why := m.spent(lowest, attempts[seq(lowest)]); why != "" {
			// The lowest failed record is given up; the others keep their
			// own counts.
			m.giveUp(ctx, log, shardID, lowest, why, attempts[seq(lowest)])
			m.checkpoint(log, shardID, lowest)
			delete(attempts, seq(lowest))
			iterator, err = streams.Iterator(ctx, m.Client, m.StreamARN, shardID, types.ShardIteratorTypeAfterSequenceNumber, seq(lowest))
			if err != nil {
				return stopped(ctx, err)
			}
			continue
		}
		if whole && !m.NoBisect {
			limit = max(1, int32(len(page.Records))/2)
		}
		failures++
		pause := min(m.Backoff<<min(failures-1, 2), 4*m.Backoff)
		log.Info("retrying from the lowest failed record", "sequence", seq(lowest), "attempt", attempts[seq(lowest)]+1,
			"records", limit, "in_ms", pause.Milliseconds())
		wait.For(ctx, pause)
		if iterator, err = streams.Iterator(ctx, m.Client, m.StreamARN, shardID, types.ShardIteratorTypeAtSequenceNumber, seq(lowest)); err != nil {
			return stopped(ctx, err)
		}
	}
	return nil
}

func seq(r types.Record) string { return aws.ToString(r.Dynamodb.SequenceNumber) }

// spent says why a record that failed attempts times is given up, or ""
// when it is retried.
func (m *StreamMapping) spent(r types.Record, attempts int) string {
	if m.MaxRetryAttempts >= 0 && attempts > m.MaxRetryAttempts {
		return "RetryAttemptsExhausted"
	}
	if at := r.Dynamodb.ApproximateCreationDateTime; m.MaxRecordAge > 0 && at != nil && time.Since(*at) > m.MaxRecordAge {
		return "RecordAgeExceeded"
	}
	return ""
}

func (m *StreamMapping) checkpoint(log *slog.Logger, shardID string, r types.Record) {
	if err := m.Checkpoints.Set(m.StreamARN, shardID, seq(r)); err != nil {
		log.Warn("cannot save the checkpoint", "error", err.Error())
	}
}

// deliver invokes the function with records and returns the indices of the
// failed ones in stream order (Lambda restarts from the first, the lowest),
// and whether the invoke failed as a whole.
func (m *StreamMapping) deliver(ctx context.Context, log *slog.Logger, records []types.Record) (failed []int, whole bool) {
	ev := lambdaevent.DynamoDBEvent{Records: make([]lambdaevent.DynamoDBEventRecord, len(records))}
	for i, r := range records {
		ev.Records[i] = lambdaRecord(r, m.StreamARN)
	}
	out, err := m.Function.Invoke(ctx, ev)
	var resp lambdaevents.DynamoDBEventResponse
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	reported := map[string]bool{}
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("invoke failed: the batch will be retried", "records", len(records), "error", err.Error())
		}
	} else {
		log.Info("batch delivered", "records", len(records), "failed", len(resp.BatchItemFailures))
		for _, f := range resp.BatchItemFailures {
			reported[f.ItemIdentifier] = true
		}
	}
	for i, r := range records {
		if err != nil || reported[seq(r)] {
			failed = append(failed, i)
		}
	}
	return failed, err != nil
}

// giveUp sends the coordinates of a record given up on to the on-failure
// destination, shaped like Lambda's stream failure records.
func (m *StreamMapping) giveUp(ctx context.Context, log *slog.Logger, shardID string, r types.Record, why string, attempts int) {
	log.Warn("record given up: its coordinates go to the on-failure destination", "sequence", seq(r), "condition", why)
	if m.OnFailure == nil {
		return
	}
	arrival := aws.ToTime(r.Dynamodb.ApproximateCreationDateTime).UTC().Format(time.RFC3339Nano)
	body, _ := json.Marshal(map[string]any{
		"version": "1.0", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"requestContext": map[string]any{"condition": why, "approximateInvokeCount": attempts},
		"DDBStreamBatchInfo": map[string]any{
			"shardId": shardID, "startSequenceNumber": seq(r), "endSequenceNumber": seq(r), "streamArn": m.StreamARN, "batchSize": 1,
			"approximateArrivalOfFirstRecord": arrival, "approximateArrivalOfLastRecord": arrival,
		},
	})
	if _, err := m.OnFailure.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(m.DLQURL), MessageBody: aws.String(string(body))}); err != nil {
		log.Error("cannot reach the on-failure destination", "error", err.Error())
	}
}

// lambdaRecord turns a record of the DynamoDB Streams API into the one
// Lambda delivers.
func lambdaRecord(r types.Record, streamARN string) lambdaevent.DynamoDBEventRecord {
	rec := streams.Record(r, streamARN)
	out := lambdaevent.DynamoDBEventRecord{
		EventID: aws.ToString(r.EventID), EventName: rec.EventName, EventVersion: aws.ToString(r.EventVersion),
		EventSource: aws.ToString(r.EventSource), AWSRegion: aws.ToString(r.AwsRegion), EventSourceArn: streamARN,
		Change: lambdaevent.DynamoDBStreamRecord{
			Keys: rec.Keys, NewImage: rec.NewImage, OldImage: rec.OldImage, SequenceNumber: rec.SequenceNumber,
		},
	}
	if t := rec.ApproximateCreationDateTime; !t.IsZero() {
		out.Change.ApproximateCreationDateTime = t.Unix()
	}
	if d := r.Dynamodb; d != nil {
		out.Change.SizeBytes, out.Change.StreamViewType = aws.ToInt64(d.SizeBytes), string(d.StreamViewType)
	}
	return out
}
