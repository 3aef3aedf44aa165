package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
)

// The fragments of an Aurora DSQL record not among the records replayed
// with it are looked for on the shards of its stream, from a minute before
// its main record reached the stream to five minutes after: AWS writes
// them with it, on any shard, and may write one again later under the same
// chunk ID. The search ends once its rows are whole.
const fragmentsBefore, fragmentsAfter = time.Minute, 5 * time.Minute

// join plans each Aurora DSQL record among records whose row came in
// fragments (the worker parks it when its batch did not hold them): from
// the fragments among raws, else also from those its stream holds.
func (r *Replayer) join(ctx context.Context, records []invalidate.Record, deliveries []events.Delivery, raws [][]byte) {
	var batch []events.Fragment
	for i := range records {
		u := (*events.Unjoined)(nil)
		if !errors.As(records[i].Err, &u) {
			continue
		}
		if batch == nil {
			batch = []events.Fragment{}
			for _, raw := range raws {
				if f, ok := events.FragmentOf(raw); ok {
					batch = append(batch, f)
				}
			}
		}
		found, chunks := &events.Fragments{}, u.Chunks()
		for _, f := range batch {
			if slices.Contains(chunks, f.Chunk) {
				found.Add(f)
			}
		}
		records[i].Changes, records[i].Err = r.fromStream(ctx, u, deliveries[i], found)
	}
}

// fromStream joins u from found, adding what its stream holds until its
// rows are whole.
func (r *Replayer) fromStream(ctx context.Context, u *events.Unjoined, d events.Delivery, found *events.Fragments) ([]events.Change, error) {
	whole := func() bool {
		changes, err := u.Join(found)
		return err == nil && changes[0].RowPart == ""
	}
	if whole() {
		return u.Join(found)
	}
	if r.Kinesis == nil || d.From == "" || d.SentAt.IsZero() {
		changes, err := u.Join(found)
		if err != nil {
			err = fmt.Errorf("%w (replay reads the other fragments from the stream with a Kinesis client, knowing its ARN and the record's arrival)", err)
		}
		return changes, err
	}
	chunks := u.Chunks()
	from, to := d.SentAt.Add(-fragmentsBefore), d.SentAt.Add(fragmentsAfter)
	shards, err := r.shards(ctx, d.From)
	for _, shard := range shards {
		if err != nil || whole() {
			break
		}
		err = r.readShard(ctx, &kinesis.GetShardIteratorInput{StreamARN: aws.String(d.From), ShardId: shard.ShardId,
			ShardIteratorType: kinesistypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(from)},
			func(k kinesistypes.Record, raw []byte) bool {
				if aws.ToTime(k.ApproximateArrivalTimestamp).After(to) {
					return false
				}
				if f, ok := events.FragmentOf(raw); ok && slices.Contains(chunks, f.Chunk) {
					found.Add(f)
				}
				return true
			})
	}
	changes, jerr := u.Join(found)
	switch {
	case jerr == nil:
		return changes, nil
	case err != nil:
		return nil, fmt.Errorf("%w; replay could not read its fragments from %s: %w", jerr, d.From, err)
	default:
		return nil, fmt.Errorf("%w (replay read the shards of %s from %s to %s)", jerr, d.From, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
}

// shards are a Kinesis stream's shards, closed ones included: a fragment
// may sit on a shard split since.
func (r *Replayer) shards(ctx context.Context, arn string) ([]kinesistypes.Shard, error) {
	var shards []kinesistypes.Shard
	in := &kinesis.ListShardsInput{StreamARN: aws.String(arn)}
	for {
		out, err := r.Kinesis.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}
