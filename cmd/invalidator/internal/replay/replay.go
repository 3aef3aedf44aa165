package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
	"github.com/invalidator-go/invalidator/worker/streams"
)

// SQS is what a Replayer needs of SQS; *sqs.Client has it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Streams is what a Replayer needs of DynamoDB Streams;
// *dynamodbstreams.Client has it.
type Streams interface {
	streams.Client
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
}

// Kinesis is what a Replayer needs of Kinesis Data Streams;
// *kinesis.Client has it.
type Kinesis interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

// Replayer replays the messages of one queue, or the objects under a
// bucket's prefix.
type Replayer struct {
	SQS     SQS
	Streams Streams
	Kinesis Kinesis
	// S3, Bucket and Prefix, with Bucket set, replay the objects under
	// Prefix instead of the queue: the batches a stream mapping's S3
	// on-failure destination kept whole.
	S3             S3
	Bucket, Prefix string
	// Worker plans each message's keys with its rules and deletes them as
	// it deletes a batch's: within its ECPU budget, then scheduled to be
	// deleted again (second delete, failover schedule, window). It parks
	// nothing: a message that fails stays in the queue.
	Worker   *worker.Worker
	QueueURL string
	// Keep leaves replayed messages in the queue, or objects in the
	// bucket, instead of deleting them.
	Keep bool
	// Max stops after this many messages. Default all.
	Max int
	// DryRun plans each message's keys and tags and reports them, touching
	// neither the cache nor the queue: every message is visible again when
	// Run returns. The Worker is asked only for its rules.
	DryRun bool
	// WaitFor keeps reading an empty queue until this many messages were
	// read, or ctx ends: for a record about to be parked.
	WaitFor int
	// Timeout bounds the invalidation of one message's changes. Default 30 s.
	Timeout time.Duration
}

// The kinds of messages a failure queue holds.
const (
	KindParked      = "parked"       // a record the worker parked, as it came
	KindStreamRange = "stream-range" // a stream mapping's on-failure record: coordinates only
	KindStreamBatch = "stream-batch" // a stream mapping's on-failure record with its event (an S3 destination's)
	KindAsyncInvoke = "async-invoke" // Lambda's on-failure record of an asynchronous (SNS) invoke
	KindChange      = "change"       // an SQS body: change message, SNS or EventBridge envelope
)

// Outcome is what replaying one message did.
type Outcome struct {
	MessageID string        `json:"messageId"`
	Kind      string        `json:"kind"`
	Source    events.Source `json:"source,omitempty"`
	// ParkedBy and Reason are, for a parked record, the function that
	// parked it and why.
	ParkedBy string `json:"parkedBy,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Records  int    `json:"records"`
	Keys     int    `json:"keys"`
	// Planned are the keys and tags a dry run would invalidate.
	Planned *Planned `json:"planned,omitempty"`
	Deleted bool     `json:"deleted"`
	Error   string   `json:"error,omitempty"`
}

// Planned is what a message's records plan.
type Planned struct {
	Keys []string `json:"keys"`
	Tags []string `json:"tags"`
}

// Run replays the queue's messages (or the bucket's objects) until none is
// left, or Max, and calls report after each. Messages that fail again are
// made visible again at the end, for the next run. It returns the outcomes'
// count and how many failed; its error is the queue's (the bucket's).
func (r *Replayer) Run(ctx context.Context, report func(Outcome)) (replayed, failed int, err error) {
	if r.Timeout <= 0 {
		r.Timeout = 30 * time.Second
	}
	if r.Bucket != "" {
		return r.runObjects(ctx, report)
	}
	var again []*string
	defer func() {
		// Failed messages are hidden until their visibility ends: show
		// them now, to whoever looks next.
		for _, handle := range again {
			_, _ = r.SQS.ChangeMessageVisibility(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(r.QueueURL), ReceiptHandle: handle, VisibilityTimeout: 0})
		}
	}()
	for r.Max <= 0 || replayed < r.Max {
		out, err := r.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(r.QueueURL), MaxNumberOfMessages: int32(min(10, max(1, r.Max-replayed))), WaitTimeSeconds: 1,
			// Long enough that a message is seen once in a run.
			VisibilityTimeout:           600,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
			MessageAttributeNames:       []string{"All"}, // a parked record's coordinates
		})
		if err != nil {
			return replayed, failed, fmt.Errorf("receive from %s: %w", r.QueueURL, err)
		}
		if len(out.Messages) == 0 && replayed >= r.WaitFor {
			return replayed, failed, nil
		}
		for _, m := range out.Messages {
			o := r.message(ctx, m)
			if o.Error == "" && !r.Keep && !r.DryRun {
				if _, err := r.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
					o.Error = "replayed, but not deleted: " + err.Error()
				} else {
					o.Deleted = true
				}
			}
			replayed++
			if o.Error != "" || r.Keep || r.DryRun {
				again = append(again, m.ReceiptHandle)
			}
			if o.Error != "" {
				failed++
			}
			report(o)
		}
	}
	return replayed, failed, nil
}

// message replays one message.
func (r *Replayer) message(ctx context.Context, m types.Message) Outcome {
	o := Outcome{MessageID: aws.ToString(m.MessageId)}
	records, err := r.records(ctx, m, &o)
	r.replay(ctx, records, err, &o)
	return o
}

// replay plans (a dry run) or invalidates the records of a message or an
// object, unless reading them failed with err.
func (r *Replayer) replay(ctx context.Context, records []invalidate.Record, err error, o *Outcome) {
	switch {
	case err != nil:
	case r.DryRun:
		err = r.plan(records, o)
	default:
		err = r.invalidate(ctx, cmp.Or(o.Source, events.SourceSQS), records, o)
	}
	if err != nil {
		o.Error = err.Error()
	}
}

// records decodes a message into the records to invalidate.
func (r *Replayer) records(ctx context.Context, m types.Message, o *Outcome) ([]invalidate.Record, error) {
	body := []byte(aws.ToString(m.Body))
	if p, ok, err := failurequeue.Parse(aws.ToString(m.Body), queues.Strings(m.MessageAttributes)); ok {
		o.Kind, o.Source, o.ParkedBy, o.Reason = KindParked, p.Source, p.Function, p.Reason
		if err != nil {
			return nil, err
		}
		return r.parked(ctx, p)
	}
	if records, ok, err := r.invocation(ctx, body, o); ok {
		return records, err
	}
	o.Kind = KindChange
	id := aws.ToString(m.MessageId)
	changes, err := events.DecodeSQSBody(id, string(body), m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)])
	return []invalidate.Record{{ID: id, Changes: changes, Err: err}}, nil
}

// invocation decodes Lambda's record of an invocation it gave up on into
// the records to invalidate: a stream batch's, from the event an S3
// destination keeps (payload) or read again from the stream at its
// coordinates (a queue or a topic gets only those); an asynchronous
// invoke's, from its event. ok is false for a body that is none of them.
func (r *Replayer) invocation(ctx context.Context, body []byte, o *Outcome) (records []invalidate.Record, ok bool, err error) {
	var envelope struct {
		Stream  *lambdaStreamBatch `json:"DDBStreamBatchInfo"`
		Kinesis *lambdaStreamBatch `json:"KinesisBatchInfo"`
		Batch   *string            `json:"payload"`
		Payload json.RawMessage    `json:"requestPayload"`
	}
	_ = json.Unmarshal(body, &envelope)
	switch {
	case envelope.Stream == nil && envelope.Kinesis == nil && envelope.Payload == nil:
		return nil, false, nil
	case envelope.Stream != nil:
		o.Source = events.SourceDynamoDB
	case envelope.Kinesis != nil:
		o.Source = events.SourceKinesis
	default:
		o.Kind, o.Source = KindAsyncInvoke, events.SourceSNS
		records, err := r.event(ctx, events.SourceSNS, envelope.Payload)
		return records, true, err
	}
	switch {
	case envelope.Batch != nil:
		o.Kind = KindStreamBatch
		records, err = r.event(ctx, o.Source, []byte(*envelope.Batch))
	case envelope.Stream != nil:
		o.Kind = KindStreamRange
		records, err = r.streamRange(ctx, *envelope.Stream)
	default:
		o.Kind = KindStreamRange
		records, err = r.kinesisRange(ctx, *envelope.Kinesis)
	}
	return records, true, err
}

// event decodes the records of a Lambda event from source, as its function
// does.
func (r *Replayer) event(ctx context.Context, source events.Source, payload []byte) ([]invalidate.Record, error) {
	raws, err := events.SplitRecords(payload)
	if err != nil {
		return nil, fmt.Errorf("the invocation's event: %w", err)
	}
	return r.decode(ctx, source, raws), nil
}

// decode decodes raw records of a Lambda event from source, as its
// function does; an Aurora DSQL record whose row came in fragments is
// joined with the fragments among them, else those its stream holds
// (fragments.go).
func (r *Replayer) decode(ctx context.Context, source events.Source, raws [][]byte) []invalidate.Record {
	records, deliveries := make([]invalidate.Record, len(raws)), make([]events.Delivery, len(raws))
	for i, raw := range raws {
		d, changes, err := events.Decode(source, raw, r.Worker.Rules().Attributes())
		records[i], deliveries[i] = invalidate.Record{ID: d.ID, Changes: changes, Err: err}, d
	}
	if source == events.SourceKinesis {
		r.join(ctx, records, deliveries, raws)
	}
	return records
}

// parked decodes a parked record as its front end did: a message's body
// with its coordinates, or a record whole, or read again from its stream.
func (r *Replayer) parked(ctx context.Context, p failurequeue.Record) ([]invalidate.Record, error) {
	switch {
	case p.Source != events.SourceSQS && p.Source != events.SourceSNS && !p.Source.Stream():
		return nil, fmt.Errorf("parked record from an unknown source %q", p.Source)
	case p.Content == failurequeue.RecordWithoutImages && p.Source == events.SourceKinesis:
		return r.kinesisRecord(ctx, p.Data)
	case p.Content == failurequeue.RecordWithoutImages && p.Source == events.SourceKafka:
		return nil, errors.New("a Kafka record parked without its value, too large for a message: replay does not read Kafka; read it at its topic, partition and offset (its ID) while the topic keeps it")
	case p.Content == failurequeue.RecordWithoutImages:
		return r.streamRecord(ctx, p.Data)
	case p.Content == failurequeue.WholeRecord:
		return r.decode(ctx, p.Source, [][]byte{p.Data}), nil
	case p.Source == events.SourceSQS:
		var sent string
		if !p.SentAt.IsZero() {
			sent = strconv.FormatInt(p.SentAt.UnixMilli(), 10)
		}
		changes, err := events.DecodeSQSBody(p.ID, string(p.Data), sent)
		return []invalidate.Record{{ID: p.ID, Changes: changes, Err: err}}, nil
	case p.Source == events.SourceSNS:
		changes, err := events.DecodeSNS(events.SNSRecord{SNS: events.SNSMessage{MessageID: p.ID, Message: string(p.Data), Timestamp: p.SentAt}})
		return []invalidate.Record{{ID: p.ID, Changes: changes, Err: err}}, nil
	default:
		return nil, fmt.Errorf("a parked %s record holds a body, which only SQS and SNS records do", p.Source)
	}
}

// lambdaStreamBatch is the coordinates a stream mapping sends to its
// on-failure destination.
type lambdaStreamBatch struct {
	ShardID   string `json:"shardId"`
	Start     string `json:"startSequenceNumber"`
	End       string `json:"endSequenceNumber"`
	StreamARN string `json:"streamArn"`
}

// streamRange reads a range of records again from their stream.
func (r *Replayer) streamRange(ctx context.Context, b lambdaStreamBatch) ([]invalidate.Record, error) {
	if r.Streams == nil {
		return nil, errors.New("no DynamoDB Streams client to read the range with")
	}
	var records []invalidate.Record
	err := streams.ReadRange(ctx, r.Streams, b.StreamARN, b.ShardID, b.Start, b.End, func(page []streamtypes.Record) error {
		for _, rec := range page {
			c, err := events.DecodeDynamoDB(streams.Record(rec, b.StreamARN))
			records = append(records, invalidate.Record{ID: aws.ToString(rec.Dynamodb.SequenceNumber), Changes: []events.Change{c}, Err: err})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s shard %s from %s to %s (the stream keeps records 24 h): %w", b.StreamARN, b.ShardID, b.Start, b.End, err)
	}
	if len(records) == 0 {
		return nil, fmt.Errorf("the stream no longer holds %s to %s of shard %s: past its 24 h", b.Start, b.End, b.ShardID)
	}
	return records, nil
}

// streamRecord reads one record, parked without its images, again from its
// stream: its shard is not in the record, so each shard is asked.
func (r *Replayer) streamRecord(ctx context.Context, content []byte) ([]invalidate.Record, error) {
	arn, seq, err := events.StreamPosition(content)
	if err != nil {
		return nil, err
	}
	desc, err := r.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", arn, err)
	}
	for _, shard := range desc.StreamDescription.Shards {
		if records, err := r.streamRange(ctx, lambdaStreamBatch{ShardID: aws.ToString(shard.ShardId), Start: seq, End: seq, StreamARN: arn}); err == nil {
			return records, nil
		}
	}
	return nil, fmt.Errorf("no shard of %s holds record %s any more: past the stream's 24 h", arn, seq)
}

// kinesisRange reads a range of records again from their Kinesis stream,
// as its mapping delivered them, and decodes them as the Kinesis function
// does.
func (r *Replayer) kinesisRange(ctx context.Context, b lambdaStreamBatch) ([]invalidate.Record, error) {
	if r.Kinesis == nil {
		return nil, errors.New("no Kinesis client to read the range with")
	}
	fail := func(err error) ([]invalidate.Record, error) {
		return nil, fmt.Errorf("reading %s shard %s from %s to %s (the stream keeps records its retention, 24 h by default): %w", b.StreamARN, b.ShardID, b.Start, b.End, err)
	}
	var raws [][]byte
	err := r.readShard(ctx, &kinesis.GetShardIteratorInput{StreamARN: aws.String(b.StreamARN), ShardId: aws.String(b.ShardID),
		ShardIteratorType: kinesistypes.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(b.Start)},
		func(rec kinesistypes.Record, raw []byte) bool {
			seq := aws.ToString(rec.SequenceNumber)
			if later := len(seq) > len(b.End) || len(seq) == len(b.End) && seq > b.End; later {
				return false
			}
			raws = append(raws, raw)
			return true
		})
	if err != nil {
		return fail(err)
	}
	if len(raws) == 0 {
		return fail(errors.New("no record left: past the stream's retention"))
	}
	return r.decode(ctx, events.SourceKinesis, raws), nil
}

// readShard reads a shard of a Kinesis stream from the iterator asked for,
// each record as its mapping delivers it to a function, until each says
// to stop or the shard ends, for now.
func (r *Replayer) readShard(ctx context.Context, from *kinesis.GetShardIteratorInput, each func(rec kinesistypes.Record, raw []byte) (more bool)) error {
	it, err := r.Kinesis.GetShardIterator(ctx, from)
	if err != nil {
		return err
	}
	arn, shard := aws.ToString(from.StreamARN), aws.ToString(from.ShardId)
	for iterator := it.ShardIterator; iterator != nil; {
		out, err := r.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{StreamARN: from.StreamARN, ShardIterator: iterator})
		if err != nil {
			return err
		}
		for _, rec := range out.Records {
			seq := aws.ToString(rec.SequenceNumber)
			raw, _ := json.Marshal(map[string]any{"eventSource": "aws:kinesis", "eventSourceARN": arn, "eventID": shard + ":" + seq,
				"kinesis": map[string]any{"sequenceNumber": seq, "partitionKey": aws.ToString(rec.PartitionKey), "data": rec.Data,
					"approximateArrivalTimestamp": float64(aws.ToTime(rec.ApproximateArrivalTimestamp).UnixMilli()) / 1000}})
			if !each(rec, raw) {
				return nil
			}
		}
		if len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
			return nil // the shard's end, for now
		}
		iterator = out.NextShardIterator
	}
	return nil
}

// kinesisRecord reads one Kinesis record, parked without its data, again
// from its stream, at its shard (in its eventID) and sequence number.
func (r *Replayer) kinesisRecord(ctx context.Context, content []byte) ([]invalidate.Record, error) {
	var rec struct {
		EventID   string `json:"eventID"`
		StreamARN string `json:"eventSourceARN"`
		Kinesis   struct {
			SequenceNumber string `json:"sequenceNumber"`
		} `json:"kinesis"`
	}
	if err := json.Unmarshal(content, &rec); err != nil || rec.StreamARN == "" || rec.Kinesis.SequenceNumber == "" {
		return nil, errors.New("a Kinesis record parked without its data names no stream (eventSourceARN) or place in it (kinesis.sequenceNumber)")
	}
	shard, _, _ := strings.Cut(rec.EventID, ":")
	return r.kinesisRange(ctx, lambdaStreamBatch{ShardID: shard, Start: rec.Kinesis.SequenceNumber, End: rec.Kinesis.SequenceNumber, StreamARN: rec.StreamARN})
}

// plan plans the records' keys and tags as the worker would; any failure
// fails the message.
func (r *Replayer) plan(records []invalidate.Record, o *Outcome) error {
	rules, p := r.Worker.Rules(), &Planned{Keys: []string{}, Tags: []string{}}
	o.Records, o.Planned = len(records), p
	var errs []error
	for _, rec := range records {
		errs = append(errs, rec.Err)
		for i := range rec.Changes {
			var kerr, terr error
			p.Keys, kerr = rules.Keys(&rec.Changes[i], p.Keys)
			p.Tags, terr = rules.Tags(&rec.Changes[i], p.Tags)
			errs = append(errs, kerr, terr)
		}
	}
	o.Keys = len(p.Keys)
	return errors.Join(errs...)
}

// invalidate deletes the records' keys, as the worker does those of a
// batch from source (a plain change message is an SQS body); any failure
// fails the message.
func (r *Replayer) invalidate(ctx context.Context, source events.Source, records []invalidate.Record, o *Outcome) error {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	out := r.Worker.Handle(ctx, source, invalidate.Decoded(records), nil)
	o.Records, o.Keys = len(records), out.Report.Metrics.KeysDeleted+out.Report.Metrics.KeysAbsent
	var errs []string
	for _, res := range out.Records {
		if res.Err != nil {
			errs = append(errs, res.Err.Error())
		}
	}
	if errs != nil {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
