package esm

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/invalidator-go/invalidator/events/lambdaevent"
	"github.com/invalidator-go/invalidator/worker/streams"
)

// StreamMapping feeds a DynamoDB stream to a function, as Lambda's stream
// event source mapping with ReportBatchItemFailures does.
type StreamMapping struct {
	Client    *dynamodbstreams.Client
	StreamARN string
	Settings
}

// Run reads the stream's shards until ctx ends.
func (m *StreamMapping) Run(ctx context.Context) error {
	return run(ctx, m.Settings, dynamoDBShards{m.Client, m.StreamARN})
}

// dynamoDBShards are a DynamoDB stream's, through the DynamoDB Streams API.
type dynamoDBShards struct {
	client *dynamodbstreams.Client
	stream string
}

// id is the stream's ARN, which names the moment it was made.
func (d dynamoDBShards) id() string { return d.stream }

func (d dynamoDBShards) list(ctx context.Context) ([]string, error) {
	desc, err := d.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(d.stream)})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range desc.StreamDescription.Shards {
		ids = append(ids, aws.ToString(s.ShardId))
	}
	return ids, nil
}

func (d dynamoDBShards) iterator(ctx context.Context, shard string, from position, seq string) (*string, error) {
	kind := [...]types.ShardIteratorType{types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest,
		types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber}[from]
	return streams.Iterator(ctx, d.client, d.stream, shard, kind, seq)
}

func (d dynamoDBShards) page(ctx context.Context, iterator *string, limit int32) ([]shardRecord, *string, error) {
	page, err := d.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(limit)})
	if err != nil {
		return nil, nil, err
	}
	records := make([]shardRecord, len(page.Records))
	for i, r := range page.Records {
		records[i] = shardRecord{seq: aws.ToString(r.Dynamodb.SequenceNumber), arrival: aws.ToTime(r.Dynamodb.ApproximateCreationDateTime), api: r}
	}
	return records, page.NextShardIterator, nil
}

func (d dynamoDBShards) event(_ string, records []shardRecord) any {
	ev := lambdaevent.DynamoDBEvent{Records: make([]lambdaevent.DynamoDBEventRecord, len(records))}
	for i, r := range records {
		ev.Records[i] = lambdaRecord(r.api.(types.Record), d.stream)
	}
	return ev
}

func (d dynamoDBShards) batchInfo(shard string, r shardRecord) (string, map[string]any) {
	return "DDBStreamBatchInfo", coordinates(d.stream, shard, r)
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
