package functions

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/jackc/pgx/v5"

	"github.com/invalidator-go/invalidator/localstack/cdc"
	"github.com/invalidator-go/invalidator/localstack/esm"
	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/localstack/testenv/awsenv"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
)

// kinesisRules plan a database's rows by their schema.table.
const kinesisRules = `tables:
  public.profile: ["cache:profile:{key.id}", "cache:color:{item.color}"]
  inventory.users: ["cache:user:{key.id}"]
  public.order_items: ["cache:order:{new.order_id}"]
`

// kinesisEvent is a Lambda Kinesis event of data, one record each, with
// sequence numbers 100, 200...
func kinesisEvent(data ...[]byte) map[string]any {
	var records []map[string]any
	for i, d := range data {
		seq := strings.Repeat("0", 18) + string(rune('1'+i)) + "00"
		records = append(records, map[string]any{
			"kinesis": map[string]any{"kinesisSchemaVersion": "1.0", "partitionKey": "k", "sequenceNumber": seq,
				"data": base64.StdEncoding.EncodeToString(d), "approximateArrivalTimestamp": 1796000000.5},
			"eventSource": "aws:kinesis", "eventID": "shardId-000000000000:" + seq, "eventName": "aws:kinesis:record",
			"awsRegion": "us-east-1", "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/commit-log",
		})
	}
	return map[string]any{"Records": records}
}

// TestKinesisFunctionUnderTheEmulator: rows as Debezium and AWS DMS write
// them to Kinesis, through the real bootstrap, delete their keys — a row
// moved from one color to another both colors —; a row whose old value
// PostgreSQL did not send is parked saying what to turn on, and one too
// large for a message without its data; no record holds the shard. An
// Aurora DSQL row too large for one Kinesis record, its fragments in the
// batch, has its key deleted.
func TestKinesisFunctionUnderTheEmulator(t *testing.T) {
	c := testenv.Cache(t)
	ns := strings.ToLower(rand.Text()[:10])
	id1, id2, id3, user := ns+"1", ns+"2", ns+"3", ns+"u"
	keys := []string{"cache:profile:" + id1, "cache:color:red" + ns, "cache:color:blue" + ns, "cache:profile:" + id3, "cache:user:" + user, "cache:order:" + ns}
	setKeys(t, c, append(keys, "cache:profile:"+id2)...)
	failures, env := failureQueue(t)
	fn := emulator(t, "kinesis-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: append(env, "INVALIDATION_RULES="+kinesisRules)})

	full := `{"before":{"id":"` + id1 + `","color":"red` + ns + `"},"after":{"id":"` + id1 + `","color":"blue` + ns + `"},` +
		`"source":{"connector":"postgresql","schema":"public","table":"profile","ts_ms":1796000000000},"op":"u","ts_ms":1796000000100}`
	noBefore := `{"schema":{"type":"struct"},"payload":{"before":null,"after":{"id":"` + id2 + `","color":"green"},` +
		`"source":{"connector":"postgresql","schema":"public","table":"profile"},"op":"u"}}`
	deleted := `{"before":{"id":"` + id3 + `","color":"blue` + ns + `"},"after":null,"source":{"schema":"public","table":"profile"},"op":"d"}`
	dms := `{"data":{"id":"` + user + `","name":"Ann"},"metadata":{"timestamp":"2026-12-07T04:00:00.123456Z","record-type":"data",` +
		`"operation":"delete","partition-key-type":"schema-table","schema-name":"inventory","table-name":"users","transaction-id":42}}`
	huge := []byte(strings.Repeat("<", 900_000)) // no JSON, and 1.2 MB in base64: over a message
	row := `{"order_id":"` + ns + `","note":"` + strings.Repeat("é", 100) + `"}`
	dsql := `{"type":"chunked","op":"u","before":null,"after":null,"source":{"schema":"public","table":"order_items"},` +
		`"chunked":{"after":{"chunk_id":"` + ns + `","total_fragments":2,"crc32c":"` + strconv.FormatUint(uint64(crc32.Checksum([]byte(row), crc32.MakeTable(crc32.Castagnoli))), 10) + `"}}}`
	fragment := func(i int, data string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "fragment", "chunk_id": ns, "index": i, "data": data})
		return b
	}
	ev := kinesisEvent([]byte(full), []byte(noBefore), []byte(deleted), []byte(dms), huge, nil, fragment(1, row[20:]), []byte(dsql), fragment(0, row[:20]))
	if failed := batchFailures(t, fn, ev); len(failed) != 0 {
		t.Fatalf("failed sequence numbers = %q, want none: the bad records are parked, so they never hold the shard", failed)
	}
	p := parked(t, failures, 2)
	if ids := parkedIDs(p); !slices.Equal(ids, []string{"000000000000000000200", "000000000000000000500"}) {
		t.Fatalf("parked %q, want 200 and 500", ids)
	}
	for _, r := range p {
		switch {
		case strings.HasSuffix(r.ID, "200") && !strings.Contains(r.Reason, "REPLICA IDENTITY FULL"):
			t.Errorf("200 parked for %q: want it to say what to turn on", r.Reason)
		case strings.HasSuffix(r.ID, "500") && r.Content != failurequeue.RecordWithoutImages:
			t.Errorf("500 parked as %s: want it without its data", r.Content)
		}
	}
	requireGone(t, c, keys...)
}

// TestAnUpdateInPostgresReachesTheKinesisFunction: the local commit log
// end to end — rows changed in a real PostgreSQL, read from its slot by the
// Debezium stand-in, put on a Kinesis stream in moto, fed by the Kinesis
// mapping to the real bootstrap — deletes their keys, a row moved between
// categories both; a TRUNCATE, which names no row, is parked, and does not
// hold its shard.
func TestAnUpdateInPostgresReachesTheKinesisFunction(t *testing.T) {
	c := testenv.Cache(t)
	pg := testenv.StartPostgres(t)
	ns := strings.ToLower(rand.Text()[:10])
	product, lighting, garden, order := "cache:product:"+ns+"1", "cache:category:lighting"+ns, "cache:category:garden"+ns, "cache:order:"+ns+"7"
	setKeys(t, c, product, lighting, garden, order)
	failures, env := failureQueue(t)
	rules := `tables:
  public.products: ["cache:product:` + ns + `{key.id}", "cache:category:{item.category}` + ns + `"]
  public.orders: ["cache:order:` + ns + `{key.id}"]
`
	fn := emulator(t, "kinesis-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: append(env, "INVALIDATION_RULES="+rules)})
	stream := awsenv.KinesisStream(t, 2)
	mapping(t, (&esm.KinesisMapping{Client: awsenv.Kinesis(t), StreamARN: stream, Region: "us-east-1", Settings: esm.Settings{Function: fn}}).Run)

	pg.Exec(t,
		"CREATE TABLE products (id int PRIMARY KEY, name text, category text)",
		"ALTER TABLE products REPLICA IDENTITY FULL",
		"CREATE TABLE orders (id int PRIMARY KEY, status text)",
		"SELECT pg_create_logical_replication_slot('invalidator', 'wal2json')",
		"INSERT INTO products VALUES (1, 'lamp', 'lighting')",
		"INSERT INTO orders VALUES (7, 'new')",
		"UPDATE products SET category = 'garden' WHERE id = 1",
		"TRUNCATE orders",
		"UPDATE orders SET status = 'paid' WHERE id = 7", // nothing: truncated
	)
	db, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	read, _, err := cdc.Read(t.Context(), db, "invalidator", "postgres", 0)
	if err != nil {
		t.Fatal(err)
	}
	k := awsenv.Kinesis(t)
	for _, ev := range read {
		// As Debezium Server's sink: the row's key as the partition key, so a
		// row's changes stay in one shard, in order.
		if _, err := k.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamARN: aws.String(stream), Data: ev, PartitionKey: aws.String("products")}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "the rows' keys were not deleted", gone(t, c, product, lighting, garden, order))
	if p := parked(t, failures, 1); len(p) != 1 || !strings.Contains(p[0].Reason, "TRUNCATE") {
		t.Fatalf("parked %+v: want the TRUNCATE alone", p)
	}
}
