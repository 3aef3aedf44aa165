package esm

import (
	"context"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// KinesisMapping feeds a Kinesis data stream to a function, as Lambda's
// Kinesis event source mapping with ReportBatchItemFailures does.
type KinesisMapping struct {
	Client    *kinesis.Client
	StreamARN string
	Region    string // the records' awsRegion
	Settings
}

// Run reads the stream's shards until ctx ends.
func (m *KinesisMapping) Run(ctx context.Context) error {
	// A Kinesis stream's ARN is its name's: a stream deleted and made again
	// (a new stack, a restarted moto) has the same one, and sequence
	// numbers that start over, so the checkpoints know it by its ARN and
	// when it was made, else they would skip its first records.
	out, err := m.Client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(m.StreamARN)})
	if err != nil {
		return stopped(ctx, err)
	}
	made := aws.ToTime(out.StreamDescriptionSummary.StreamCreationTimestamp)
	return run(ctx, m.Settings, kinesisShards{m.Client, m.StreamARN, m.Region, m.StreamARN + " " + made.UTC().Format(time.RFC3339Nano)})
}

// kinesisShards are a Kinesis data stream's.
type kinesisShards struct {
	client             *kinesis.Client
	stream, region, as string
}

func (k kinesisShards) id() string { return k.as }

func (k kinesisShards) list(ctx context.Context) ([]string, error) {
	var ids []string
	in := &kinesis.ListShardsInput{StreamARN: aws.String(k.stream)}
	for {
		out, err := k.client.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, s := range out.Shards {
			ids = append(ids, aws.ToString(s.ShardId))
		}
		if out.NextToken == nil {
			return ids, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func (k kinesisShards) iterator(ctx context.Context, shard string, from position, seq string) (*string, error) {
	in := &kinesis.GetShardIteratorInput{StreamARN: aws.String(k.stream), ShardId: aws.String(shard),
		ShardIteratorType: [...]types.ShardIteratorType{types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest,
			types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber}[from]}
	if seq != "" {
		in.StartingSequenceNumber = aws.String(seq)
	}
	out, err := k.client.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

func (k kinesisShards) page(ctx context.Context, iterator *string, limit int32) ([]shardRecord, *string, error) {
	page, err := k.client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(limit), StreamARN: aws.String(k.stream)})
	if err != nil {
		return nil, nil, err
	}
	records := make([]shardRecord, len(page.Records))
	for i, r := range page.Records {
		records[i] = shardRecord{seq: aws.ToString(r.SequenceNumber), arrival: aws.ToTime(r.ApproximateArrivalTimestamp), api: r}
	}
	return records, page.NextShardIterator, nil
}

func (k kinesisShards) event(shard string, records []shardRecord) any {
	ev := lambdaevents.KinesisEvent{Records: make([]lambdaevents.KinesisEventRecord, len(records))}
	for i, sr := range records {
		r := sr.api.(types.Record)
		ev.Records[i] = lambdaevents.KinesisEventRecord{
			AwsRegion: k.region, EventID: shard + ":" + sr.seq, EventName: "aws:kinesis:record", EventSource: "aws:kinesis",
			EventSourceArn: k.stream, EventVersion: "1.0",
			Kinesis: lambdaevents.KinesisRecord{
				ApproximateArrivalTimestamp: lambdaevents.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)},
				Data:                        r.Data, EncryptionType: string(r.EncryptionType), PartitionKey: aws.ToString(r.PartitionKey),
				SequenceNumber: sr.seq, KinesisSchemaVersion: "1.0",
			},
		}
	}
	return ev
}

func (k kinesisShards) batchInfo(shard string, r shardRecord) (string, map[string]any) {
	return "KinesisBatchInfo", coordinates(k.stream, shard, r)
}
