package inspect

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/invalidator-go/invalidator/events"
)

// fakeStream has a shard closed before the inspector came, an open parent
// with two records that closes after its first read, and its child, with
// one record, which appears when the parent closes.
type fakeStream struct {
	mu     sync.Mutex
	closed bool // the parent
}

func record(seq, id string) types.Record {
	return types.Record{EventName: types.OperationTypeModify, Dynamodb: &types.StreamRecord{
		SequenceNumber: aws.String(seq), Keys: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		NewImage: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "version": &types.AttributeValueMemberN{Value: "2"}}}}
}

func (f *fakeStream) DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	done := &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1"), EndingSequenceNumber: aws.String("9")}
	shards := []types.Shard{{ShardId: aws.String("old"), SequenceNumberRange: done}, {ShardId: aws.String("parent"), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("10")}}}
	if f.closed {
		shards[1].SequenceNumberRange = done
		shards = append(shards, types.Shard{ShardId: aws.String("child"), ParentShardId: aws.String("parent")})
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: &types.StreamDescription{Shards: shards}}, nil
}

func (f *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(*in.ShardId + "/" + string(in.ShardIteratorType))}, nil
}

func (f *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	switch *in.ShardIterator {
	case "old/" + string(types.ShardIteratorTypeTrimHorizon), "old/" + string(types.ShardIteratorTypeLatest):
		return &dynamodbstreams.GetRecordsOutput{Records: []types.Record{record("5", "from-before")}}, nil
	case "parent/" + string(types.ShardIteratorTypeLatest):
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		return &dynamodbstreams.GetRecordsOutput{Records: []types.Record{record("11", "p1"), record("12", "p2")}}, nil // and closed
	case "child/" + string(types.ShardIteratorTypeTrimHorizon):
		return &dynamodbstreams.GetRecordsOutput{Records: []types.Record{record("20", "c1")}, NextShardIterator: aws.String("child/end")}, nil
	default:
		return &dynamodbstreams.GetRecordsOutput{NextShardIterator: in.ShardIterator}, nil
	}
}

func TestStreamReadsOpenShardsAndTheirChildren(t *testing.T) {
	s := &Stream{Client: &fakeStream{}, ARN: "arn:aws:dynamodb:us-east-1:123456789012:table/Products/stream/1", Poll: time.Millisecond, Rescan: time.Hour}
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	var ids []string
	done := make(chan error)
	go func() {
		done <- s.Read(ctx, func(changes []events.Change, err error) {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range changes {
				ids = append(ids, c.ID)
			}
		}, func(err error) { t.Errorf("read failed: %v", err) })
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(ids)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The closed shard is not read; the child is found when its parent
	// closes, not at the next rescan an hour later.
	if want := []string{"p1", "p2", "c1"}; !slices.Equal(ids, want) {
		t.Fatalf("read %v, want %v", ids, want)
	}
}
