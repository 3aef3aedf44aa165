package replay

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues"
)

// TestReplayJoinsAnAuroraDSQLRowFromItsStream: an Aurora DSQL record whose
// row came in fragments on other shards, parked by the worker as it must
// be, has its keys deleted by replay, which finds the fragments on the
// stream's shards; the same record whose fragments the stream does not
// hold fails, saying how many it found, and stays in the queue.
func TestReplayJoinsAnAuroraDSQLRowFromItsStream(t *testing.T) {
	cache := testenv.Cache(t)
	ns := rand.Text()
	k := awsenv.Kinesis(t)
	arn := awsenv.KinesisStream(t, 4)
	row := `{"order_id": "` + ns + `", "note": "` + strings.Repeat("x", 200) + `"}`
	put := func(hashKey string, data any) string {
		body, _ := json.Marshal(data)
		out, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamARN: aws.String(arn), PartitionKey: aws.String("random"),
			ExplicitHashKey: aws.String(hashKey), Data: body})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ShardId)
	}
	shards := map[string]bool{}
	// one on each of three of the four shards, as a random partition key
	// would have it: 0, 2^126, 2^127 of the 2^128 hash keys
	for i, piece := range []string{row[:40], row[40:150], row[150:]} {
		shards[put([]string{"0", "85070591730234615865843651857942052864", "170141183460469231731687303715884105728"}[i], map[string]any{"type": "fragment", "chunk_id": ns, "index": i, "data": piece})] = true
	}
	if len(shards) != 3 {
		t.Fatalf("the fragments went to %v; want three shards", shards)
	}
	main := func(chunk string) failurequeue.Record {
		body, _ := json.Marshal(map[string]any{"type": "chunked", "op": "u", "before": nil, "after": nil,
			"source": map[string]any{"schema": "public", "table": "order_items", "ts_ms": time.Now().UnixMilli()},
			"chunked": map[string]any{"after": map[string]any{"chunk_id": chunk, "total_fragments": 3,
				"crc32c": strconv.FormatUint(uint64(crc32.Checksum([]byte(row), crc32.MakeTable(crc32.Castagnoli))), 10)}}})
		raw, _ := json.Marshal(map[string]any{"eventSource": "aws:kinesis", "eventSourceARN": arn, "eventID": "shardId-000000000000:4" + chunk,
			"kinesis": map[string]any{"sequenceNumber": "4" + chunk, "partitionKey": "main", "data": base64.StdEncoding.EncodeToString(body),
				"approximateArrivalTimestamp": float64(time.Now().UnixMilli()) / 1000}})
		return failurequeue.Record{Source: events.SourceKinesis, ID: "4" + chunk, Reason: "parked", Content: failurequeue.WholeRecord, Data: raw}
	}
	q := testQueue(t)
	for _, rec := range []failurequeue.Record{main(ns), main(ns + "-elsewhere")} {
		m, err := rec.Message(failurequeue.MaxBytes)
		if err == nil {
			err = queues.Send(t.Context(), awsenv.SQS(t), q, m)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	key := "cache:replay:" + ns
	if err := cache.Do(t.Context(), cache.B().Set().Key(key).Value("stale").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	rules, err := invalidate.ParseRules([]byte(`{dsqlTables: [public.order_items], tables: {public.order_items: ["cache:replay:{new.order_id}"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := &Replayer{SQS: awsenv.SQS(t), Kinesis: k, QueueURL: q, Worker: quietWorker(invalidate.New(invalidate.Valkey(cache), invalidate.Options{Rules: rules}), worker.Options{})}
	var outcomes []Outcome
	replayed, failed, err := r.Run(t.Context(), func(o Outcome) { outcomes = append(outcomes, o) })
	if err != nil || replayed != 2 || failed != 1 {
		t.Fatalf("replayed %d, failed %d, %v; want the record whose fragments the stream holds, alone: %+v", replayed, failed, err, outcomes)
	}
	for _, o := range outcomes {
		if o.Error != "" && !strings.Contains(o.Error, "0 of the 3 fragments") {
			t.Errorf("%+v: want the record without fragments to say it found none", o)
		}
	}
	if n, err := cache.Do(t.Context(), cache.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("%s is still cached (%v)", key, err)
	}
}

// TestReplayJoinsFromTheRecordsReplayedWithIt: a batch replayed whole (an
// S3 object, a range) joins an Aurora DSQL record with the fragments among
// its records, asking no stream; without them and without a Kinesis client
// it fails, saying what replay would need.
func TestReplayJoinsFromTheRecordsReplayedWithIt(t *testing.T) {
	rules, err := invalidate.ParseRules([]byte(`{tables: {public.order_items: ["cache:order:{new.order_id}"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := &Replayer{Worker: quietWorker(invalidate.New(&cachetest.Cache{}, invalidate.Options{Rules: rules}), worker.Options{})}
	row := `{"order_id": 42, "note": "` + strings.Repeat("y", 60) + `"}`
	record := func(seq string, data any) []byte {
		body, _ := json.Marshal(data)
		raw, _ := json.Marshal(map[string]any{"eventSource": "aws:kinesis", "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/s",
			"kinesis": map[string]any{"sequenceNumber": seq, "data": base64.StdEncoding.EncodeToString(body), "approximateArrivalTimestamp": 1796000000.5}})
		return raw
	}
	main := record("1", map[string]any{"type": "chunked", "op": "c", "before": nil, "after": nil, "source": map[string]any{"schema": "public", "table": "order_items"},
		"chunked": map[string]any{"after": map[string]any{"chunk_id": "x", "total_fragments": 2,
			"crc32c": strconv.FormatUint(uint64(crc32.Checksum([]byte(row), crc32.MakeTable(crc32.Castagnoli))), 10)}}})
	frag := func(i int, data string) []byte {
		return record(strconv.Itoa(2+i), map[string]any{"type": "fragment", "chunk_id": "x", "index": i, "data": data})
	}
	records := r.decode(t.Context(), events.SourceKinesis, [][]byte{frag(1, row[30:]), main, frag(0, row[:30])})
	if records[1].Err != nil || len(records[1].Changes) != 1 || records[1].Changes[0].NewImage["order_id"].S != "42" || records[1].Changes[0].RowPart != "" {
		t.Fatalf("%+v: want the main record joined from its batch", records[1])
	}
	records = r.decode(t.Context(), events.SourceKinesis, [][]byte{main})
	if records[0].Err == nil || !strings.Contains(records[0].Err.Error(), "with a Kinesis client") {
		t.Fatalf("%+v: want it failed, saying replay needs a Kinesis client", records[0])
	}
}
