package esm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// StreamMapping feeds a DynamoDB stream to a function, as Lambda's stream
// event source mapping with ReportBatchItemFailures does.
type StreamMapping struct {
	Client    *dynamodbstreams.Client
	StreamARN string
	Function  Invoker
	// BatchSize is the most records per invoke. Default 100.
	BatchSize int32
	// FromStart reads the stream from its oldest record (TRIM_HORIZON)
	// instead of from now (LATEST).
	FromStart bool
	// MaxRetryAttempts is how many times a failed record is retried before
	// it goes to OnFailure. Default 2.
	MaxRetryAttempts int
	// OnFailure, when set, receives one message per record given up on.
	OnFailure *sqs.Client
	DLQURL    string
	Logger    *slog.Logger
}

// Run reads the stream's shards until ctx ends.
func (m *StreamMapping) Run(ctx context.Context) error {
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

func (m *StreamMapping) shard(ctx context.Context, shardID string) error {
	log := logger(m.Logger).With("mapping", "stream", "shard", shardID)
	position := types.ShardIteratorTypeLatest
	if m.FromStart {
		position = types.ShardIteratorTypeTrimHorizon
	}
	iterator, err := m.iterator(ctx, shardID, position, "")
	if err != nil {
		return stopped(ctx, err)
	}
	limit, maxRetries := m.BatchSize, m.MaxRetryAttempts
	if limit <= 0 {
		limit = 100
	}
	if maxRetries <= 0 {
		maxRetries = 2
	}
	attempts := map[string]int{} // sequence number → failed invokes
	for ctx.Err() == nil {
		page, err := m.Client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(limit)})
		if err != nil {
			return stopped(ctx, fmt.Errorf("get records: %w", err))
		}
		// moto's shards never close (NextShardIterator is never nil): an
		// empty page means caught up.
		if len(page.Records) == 0 {
			iterator = page.NextShardIterator
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		failed := m.deliver(ctx, log, page.Records)
		if len(failed) == 0 {
			iterator = page.NextShardIterator
			continue
		}
		failedSeq := failed[0]
		attempts[failedSeq]++
		if attempts[failedSeq] > maxRetries {
			// The retries are spent: the records that failed this last time
			// go to the on-failure destination, the others succeeded in it,
			// and the mapping moves past the batch, as Lambda does.
			m.giveUp(ctx, log, shardID, failed)
			iterator = page.NextShardIterator
			continue
		}
		log.Info("retrying from the lowest failed record", "sequence", failedSeq, "attempt", attempts[failedSeq])
		if iterator, err = m.iterator(ctx, shardID, types.ShardIteratorTypeAtSequenceNumber, failedSeq); err != nil {
			return stopped(ctx, err)
		}
	}
	return nil
}

func (m *StreamMapping) iterator(ctx context.Context, shardID string, kind types.ShardIteratorType, seq string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(m.StreamARN), ShardId: aws.String(shardID), ShardIteratorType: kind}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	}
	out, err := m.Client.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("shard iterator: %w", err)
	}
	return out.ShardIterator, nil
}

// deliver invokes the function with records and returns the sequence
// numbers of the failed ones in stream order; Lambda restarts from the first
// (the lowest). A failed invoke fails every record.
func (m *StreamMapping) deliver(ctx context.Context, log *slog.Logger, records []types.Record) []string {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(records))}
	for i, r := range records {
		ev.Records[i] = lambdaRecord(r, m.StreamARN)
	}
	out, err := m.Function.Invoke(ctx, ev)
	var resp events.DynamoDBEventResponse
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	reported := map[string]bool{}
	if err != nil {
		log.Warn("invoke failed: the batch will be retried", "records", len(records), "error", err.Error())
	} else {
		log.Info("batch delivered", "records", len(records), "failed", len(resp.BatchItemFailures))
		for _, f := range resp.BatchItemFailures {
			reported[f.ItemIdentifier] = true
		}
	}
	var failed []string
	for _, r := range records {
		if seq := aws.ToString(r.Dynamodb.SequenceNumber); err != nil || reported[seq] {
			failed = append(failed, seq)
		}
	}
	return failed
}

// giveUp sends each failed record to the on-failure queue, shaped like
// Lambda's stream failure records.
func (m *StreamMapping) giveUp(ctx context.Context, log *slog.Logger, shardID string, failed []string) {
	for _, seq := range failed {
		log.Warn("retries spent: record sent to the on-failure destination", "sequence", seq)
		if m.OnFailure == nil {
			continue
		}
		body, _ := json.Marshal(map[string]any{
			"requestContext": map[string]any{"condition": "RetryAttemptsExhausted", "approximateInvokeCount": m.MaxRetryAttempts + 1},
			"DDBStreamBatchInfo": map[string]any{
				"shardId": shardID, "startSequenceNumber": seq, "endSequenceNumber": seq, "streamArn": m.StreamARN, "batchSize": 1,
			},
		})
		if _, err := m.OnFailure.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(m.DLQURL), MessageBody: aws.String(string(body))}); err != nil {
			log.Error("cannot reach the on-failure destination", "error", err.Error())
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// lambdaRecord turns a DynamoDB Streams API record into the record Lambda
// delivers.
func lambdaRecord(r types.Record, streamARN string) events.DynamoDBEventRecord {
	rec := events.DynamoDBEventRecord{
		EventID: aws.ToString(r.EventID), EventName: string(r.EventName), EventVersion: aws.ToString(r.EventVersion),
		EventSource: aws.ToString(r.EventSource), AWSRegion: aws.ToString(r.AwsRegion), EventSourceArn: streamARN,
	}
	if d := r.Dynamodb; d != nil {
		rec.Change = events.DynamoDBStreamRecord{
			Keys: image(d.Keys), NewImage: image(d.NewImage), OldImage: image(d.OldImage),
			SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes), StreamViewType: string(d.StreamViewType),
		}
		if d.ApproximateCreationDateTime != nil {
			rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
	}
	return rec
}

func image(in map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if in == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(in))
	for k, v := range in {
		out[k] = attribute(v)
	}
	return out
}

func attribute(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(image(v.Value))
	case *types.AttributeValueMemberL:
		list := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			list[i] = attribute(e)
		}
		return events.NewListAttribute(list)
	default:
		return events.NewNullAttribute()
	}
}
