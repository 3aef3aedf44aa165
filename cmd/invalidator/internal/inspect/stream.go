package inspect

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/wait"
	"github.com/invalidator-go/invalidator/worker/streams"
)

// StreamsClient is what a Stream needs of a DynamoDB Streams client;
// *dynamodbstreams.Client has it.
type StreamsClient interface {
	streams.Client
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
}

// Stream reads a DynamoDB stream beside the stream function: a shard
// allows two readers. It starts at the end of the shards open when it
// starts, and reads the shards that open later from their beginning.
type Stream struct {
	Client StreamsClient
	ARN    string
	// Poll is the pause between reads of a shard. Default 1 s: Lambda
	// reads each shard four times a second and a shard serves five reads a
	// second, so the inspector takes what is left and never throttles the
	// worker. A read returns up to 1,000 records: a shard written faster
	// than that outruns the inspector, whose checks then come late (and
	// are counted late).
	Poll time.Duration
	// Rescan is how often new shards are looked for. Default 30 s.
	Rescan time.Duration
}

// Read reads every shard until ctx ends. A stream that cannot be described
// is an error at once.
func (s *Stream) Read(ctx context.Context, emit func([]events.Change, error), failed func(error)) error {
	known := map[string]bool{}
	var wg sync.WaitGroup
	defer wg.Wait()
	closed := make(chan struct{}, 1) // a shard ended: its children are open
	for first := true; ctx.Err() == nil; first = false {
		shards, err := s.shards(ctx)
		switch {
		case err != nil && first:
			return err
		case err != nil:
			failed(err)
		default:
			open := 0
			for _, sh := range shards {
				id := aws.ToString(sh.ShardId)
				if known[id] {
					continue
				}
				known[id] = true
				kind := types.ShardIteratorTypeTrimHorizon
				if first {
					if sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil {
						continue // closed before the inspector came
					}
					kind = types.ShardIteratorTypeLatest
				}
				open++
				wg.Go(func() {
					s.shard(ctx, id, kind, emit, failed)
					select {
					case closed <- struct{}{}:
					default:
					}
				})
			}
			if first && open == 0 {
				return fmt.Errorf("stream %s has no open shard: is it disabled?", s.ARN)
			}
		}
		t := time.NewTimer(cmp.Or(s.Rescan, 30*time.Second))
		select {
		case <-ctx.Done():
		case <-closed:
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

func (s *Stream) shards(ctx context.Context) ([]types.Shard, error) {
	var all []types.Shard
	var after *string
	for {
		out, err := s.Client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.ARN), ExclusiveStartShardId: after})
		if err != nil {
			return nil, fmt.Errorf("describe stream %s: %w", s.ARN, err)
		}
		all = append(all, out.StreamDescription.Shards...)
		if after = out.StreamDescription.LastEvaluatedShardId; after == nil {
			return all, nil
		}
	}
}

// shard reads one shard until it closes or ctx ends. After a failed read
// it starts again after the last record it read.
func (s *Stream) shard(ctx context.Context, id string, kind types.ShardIteratorType, emit func([]events.Change, error), failed func(error)) {
	var last string
	var iterator *string
	for ctx.Err() == nil {
		if iterator == nil {
			var err error
			if last != "" {
				iterator, err = streams.Iterator(ctx, s.Client, s.ARN, id, types.ShardIteratorTypeAfterSequenceNumber, last)
			} else {
				iterator, err = streams.Iterator(ctx, s.Client, s.ARN, id, kind, "")
			}
			if err != nil {
				if ctx.Err() == nil {
					failed(fmt.Errorf("shard %s: %w", id, err))
				}
				wait.For(ctx, time.Second)
				continue
			}
		}
		page, err := s.Client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iterator})
		if err != nil {
			if ctx.Err() == nil {
				failed(fmt.Errorf("shard %s: get records: %w", id, err))
			}
			iterator = nil
			wait.For(ctx, time.Second)
			continue
		}
		for _, r := range page.Records {
			if r.Dynamodb == nil {
				continue
			}
			c, err := events.DecodeDynamoDB(streams.Record(r, s.ARN))
			if err != nil {
				emit(nil, err)
			} else {
				emit([]events.Change{c}, nil)
			}
			last = aws.ToString(r.Dynamodb.SequenceNumber)
		}
		if page.NextShardIterator == nil {
			return // the shard is closed and read
		}
		iterator = page.NextShardIterator
		wait.For(ctx, cmp.Or(s.Poll, time.Second))
	}
}
