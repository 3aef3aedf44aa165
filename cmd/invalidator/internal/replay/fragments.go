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

// The fragments of an Aurora DSQL record are looked for on every shard of
// its stream, from a minute before its main record reached the stream to
// five minutes after: AWS writes them with it, on any shard, and may write
// one again later under the same chunk ID.
const fragmentsBefore, fragmentsAfter = time.Minute, 5 * time.Minute

// joined plans an Aurora DSQL record whose row came in fragments (the
// worker parks it when its batch did not hold them) from the fragments its
// stream still holds; any other record is returned as it is.
func (r *Replayer) joined(ctx context.Context, d events.Delivery, rec invalidate.Record) invalidate.Record {
	u := (*events.Unjoined)(nil)
	if !errors.As(rec.Err, &u) || r.Kinesis == nil || d.From == "" || d.SentAt.IsZero() {
		return rec
	}
	chunks := u.Chunks()
	from, to := d.SentAt.Add(-fragmentsBefore), d.SentAt.Add(fragmentsAfter)
	found := map[string][]events.Fragment{}
	shards, err := r.shards(ctx, d.From)
	for _, shard := range shards {
		if err != nil {
			break
		}
		err = r.readShard(ctx, &kinesis.GetShardIteratorInput{StreamARN: aws.String(d.From), ShardId: shard.ShardId,
			ShardIteratorType: kinesistypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(from)},
			func(k kinesistypes.Record, raw []byte) bool {
				if aws.ToTime(k.ApproximateArrivalTimestamp).After(to) {
					return false
				}
				fd, _, _ := events.Decode(events.SourceKinesis, raw, nil)
				if f, ok := events.FragmentOf(fd); ok && slices.Contains(chunks, f.Chunk) {
					found[f.Chunk] = append(found[f.Chunk], f)
				}
				return true
			})
	}
	if err != nil {
		rec.Err = fmt.Errorf("%w; replay could not read its fragments from %s: %w", rec.Err, d.From, err)
		return rec
	}
	if rec.Changes, rec.Err = u.Join(found); rec.Err != nil {
		rec.Err = fmt.Errorf("%w (replay read every shard of %s from %s to %s)", rec.Err, d.From, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return rec
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
