package replay

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/invalidator-go/invalidator/invalidate"
)

// S3 is what a Replayer needs of S3 to replay a bucket's objects;
// *s3.Client has it.
type S3 interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// maxObjectBytes bounds what replay reads of one object: an invocation's
// event is at most 6 MB, and escaped in the payload it may double.
const maxObjectBytes = 16 << 20

// runObjects replays the objects under the prefix, in the order S3 lists
// them (by key: by shard, then by time).
func (r *Replayer) runObjects(ctx context.Context, report func(Outcome)) (replayed, failed int, err error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(r.Prefix)}
	for {
		page, err := r.S3.ListObjectsV2(ctx, in)
		if err != nil {
			return replayed, failed, fmt.Errorf("list s3://%s/%s: %w", r.Bucket, r.Prefix, err)
		}
		for _, obj := range page.Contents {
			if r.Max > 0 && replayed >= r.Max {
				return replayed, failed, nil
			}
			o := r.object(ctx, aws.ToString(obj.Key), aws.ToInt64(obj.Size))
			if o.Error == "" && !r.Keep && !r.DryRun {
				if _, err := r.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(r.Bucket), Key: obj.Key}); err != nil {
					o.Error = "replayed, but not deleted: " + err.Error()
				} else {
					o.Deleted = true
				}
			}
			replayed++
			if o.Error != "" {
				failed++
			}
			report(o)
		}
		if !aws.ToBool(page.IsTruncated) {
			return replayed, failed, nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// object replays one object: Lambda's record of a stream batch it gave up
// on, with the batch's event.
func (r *Replayer) object(ctx context.Context, key string, size int64) Outcome {
	o := Outcome{MessageID: key}
	records, err := r.objectRecords(ctx, key, size, &o)
	r.replay(ctx, records, err, &o)
	return o
}

func (r *Replayer) objectRecords(ctx context.Context, key string, size int64, o *Outcome) ([]invalidate.Record, error) {
	if size > maxObjectBytes {
		return nil, fmt.Errorf("%d bytes, over the %d an invocation record holds: not read", size, maxObjectBytes)
	}
	got, err := r.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(got.Body, maxObjectBytes+1))
	_ = got.Body.Close()
	switch {
	case err != nil:
		return nil, err
	case len(body) > maxObjectBytes:
		return nil, fmt.Errorf("over the %d bytes an invocation record holds: not read", maxObjectBytes)
	}
	records, ok, err := r.invocation(ctx, body, o)
	if !ok {
		return nil, errors.New("not Lambda's record of a failed invocation (no DDBStreamBatchInfo, KinesisBatchInfo or requestPayload)")
	}
	return records, err
}
