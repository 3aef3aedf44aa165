package streams

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/invalidator-go/invalidator/events"
)

// Client is what the package needs of a DynamoDB Streams client;
// *dynamodbstreams.Client has it.
type Client interface {
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Iterator returns a shard iterator of kind, at or after seq for the kinds
// that take one.
func Iterator(ctx context.Context, c Client, streamARN, shardID string, kind types.ShardIteratorType, seq string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamARN), ShardId: aws.String(shardID), ShardIteratorType: kind}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	}
	out, err := c.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("shard iterator: %w", err)
	}
	return out.ShardIterator, nil
}

// compare orders two sequence numbers of a shard: decimal numbers of up to
// 40 digits, longer than an int64.
func compare(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// ReadRange calls fn with the records of a shard from sequence number from
// to to, both included, page by page, until to is passed or the shard has
// no more records.
func ReadRange(ctx context.Context, c Client, streamARN, shardID, from, to string, fn func([]types.Record) error) error {
	iterator, err := Iterator(ctx, c, streamARN, shardID, types.ShardIteratorTypeAtSequenceNumber, from)
	if err != nil {
		return err
	}
	for iterator != nil {
		page, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iterator})
		if err != nil {
			return fmt.Errorf("get records: %w", err)
		}
		records := page.Records
		for i, r := range records {
			if compare(aws.ToString(r.Dynamodb.SequenceNumber), to) > 0 {
				records = records[:i]
				page.NextShardIterator = nil
				break
			}
		}
		if len(records) > 0 {
			if err := fn(records); err != nil {
				return err
			}
		}
		// A shard that is still open hands out empty pages once caught up.
		if len(page.Records) == 0 {
			return nil
		}
		iterator = page.NextShardIterator
	}
	return nil
}

// Record turns a record of the DynamoDB Streams API into the one the
// decoder takes.
func Record(r types.Record, streamARN string) events.StreamRecord {
	rec := events.StreamRecord{EventName: string(r.EventName), EventSourceARN: streamARN}
	if d := r.Dynamodb; d != nil {
		rec.Keys, rec.NewImage, rec.OldImage = image(d.Keys), image(d.NewImage), image(d.OldImage)
		rec.SequenceNumber = aws.ToString(d.SequenceNumber)
		rec.ApproximateCreationDateTime = aws.ToTime(d.ApproximateCreationDateTime)
	}
	return rec
}

func image(in map[string]types.AttributeValue) events.Image {
	if in == nil {
		return nil
	}
	out := make(events.Image, len(in))
	for k, v := range in {
		out[k] = attribute(v)
	}
	return out
}

func attribute(v types.AttributeValue) events.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.AttributeValue{Type: events.TypeString, S: v.Value}
	case *types.AttributeValueMemberN:
		return events.AttributeValue{Type: events.TypeNumber, S: v.Value}
	case *types.AttributeValueMemberB:
		return events.AttributeValue{Type: events.TypeBinary, B: v.Value}
	case *types.AttributeValueMemberBOOL:
		return events.AttributeValue{Type: events.TypeBoolean, BOOL: v.Value}
	case *types.AttributeValueMemberSS:
		return events.AttributeValue{Type: events.TypeStringSet, SS: v.Value}
	case *types.AttributeValueMemberNS:
		return events.AttributeValue{Type: events.TypeNumberSet, SS: v.Value}
	case *types.AttributeValueMemberBS:
		return events.AttributeValue{Type: events.TypeBinarySet, BS: v.Value}
	case *types.AttributeValueMemberM:
		return events.AttributeValue{Type: events.TypeMap, M: image(v.Value)}
	case *types.AttributeValueMemberL:
		list := make([]events.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			list[i] = attribute(e)
		}
		return events.AttributeValue{Type: events.TypeList, L: list}
	default:
		return events.AttributeValue{Type: events.TypeNull}
	}
}
