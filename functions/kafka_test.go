package functions

import (
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/localstack/rie"
	"github.com/invalidator-go/invalidator/localstack/testenv"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
)

// kafkaEvent is a Lambda MSK event of values on partition 0 of topic
// commit-log, at offsets 100, 101...; a nil value is a tombstone.
func kafkaEvent(values ...[]byte) map[string]any {
	var records []map[string]any
	for i, v := range values {
		r := map[string]any{"topic": "commit-log", "partition": 0, "offset": 100 + i, "timestamp": 1796000000500, "timestampType": "CREATE_TIME",
			"key": base64.StdEncoding.EncodeToString([]byte(`{"id":1}`)), "value": nil, "headers": []any{}}
		if v != nil {
			r["value"] = base64.StdEncoding.EncodeToString(v)
		}
		records = append(records, r)
	}
	return map[string]any{"eventSource": "aws:kafka", "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/commit-log/1",
		"bootstrapServers": "b-1.commit-log.kafka.us-east-1.amazonaws.com:9098", "records": map[string]any{"commit-log-0": records}}
}

// TestKafkaFunctionUnderTheEmulator: Debezium's and AWS DMS's rows in a
// Kafka event, through the real bootstrap, delete their keys; a tombstone
// changes nothing; a row whose old value PostgreSQL did not send is parked
// saying what to turn on, one too large for a message without its value,
// and the invoke is done. With the cache out of reach it fails, naming
// the records to retry: Lambda retries the batch.
func TestKafkaFunctionUnderTheEmulator(t *testing.T) {
	c := testenv.Cache(t)
	ns := strings.ToLower(rand.Text()[:10])
	id1, id2, user := ns+"1", ns+"2", ns+"u"
	keys := []string{"cache:profile:" + id1, "cache:color:red" + ns, "cache:color:blue" + ns, "cache:user:" + user}
	setKeys(t, c, keys...)
	failures, env := failureQueue(t)
	fn := emulator(t, "kafka-invalidate", testenv.WorkerCacheConfig(t), rie.Options{Env: append(env, "INVALIDATION_RULES="+kinesisRules)})

	full := `{"schema":{"type":"struct"},"payload":{"before":{"id":"` + id1 + `","color":"red` + ns + `"},"after":{"id":"` + id1 + `","color":"blue` + ns + `"},` +
		`"source":{"connector":"postgresql","schema":"public","table":"profile"},"op":"u"}}`
	noBefore := `{"before":null,"after":{"id":"` + id2 + `","color":"green"},"source":{"schema":"public","table":"profile"},"op":"u"}`
	dms := `{"data":{"id":"` + user + `","name":"Ann"},"metadata":{"record-type":"data","operation":"delete","schema-name":"inventory","table-name":"users"}}`
	huge := []byte(strings.Repeat("<", 900_000)) // no JSON, and 1.2 MB in base64: over a message
	if out, err := fn.Invoke(t.Context(), kafkaEvent([]byte(full), nil, []byte(noBefore), []byte(dms), huge)); err != nil || string(out) != "{}" {
		t.Fatalf("invoke: %s, %v; want it done, the bad records parked", out, err)
	}
	requireGone(t, c, keys...)
	p := parked(t, failures, 2)
	if ids := parkedIDs(p); !slices.Equal(ids, []string{"commit-log-0@102", "commit-log-0@104"}) {
		t.Fatalf("parked %q, want offsets 102 and 104", ids)
	}
	for _, r := range p {
		switch {
		case r.Source != "kafka":
			t.Errorf("%s parked from %q, want kafka", r.ID, r.Source)
		case strings.HasSuffix(r.ID, "102") && !strings.Contains(r.Reason, "REPLICA IDENTITY FULL"):
			t.Errorf("102 parked for %q: want it to say what to turn on", r.Reason)
		case strings.HasSuffix(r.ID, "104") && r.Content != failurequeue.RecordWithoutImages:
			t.Errorf("104 parked as %s: want it without its value", r.Content)
		}
	}

	nowhere := testenv.WorkerCacheConfig(t)
	nowhere.Endpoint = "127.0.0.1:1"
	down := emulator(t, "kafka-invalidate", nowhere, rie.Options{Env: append(env, "INVALIDATION_RULES="+kinesisRules), Timeout: 3 * time.Second})
	if _, err := down.Invoke(t.Context(), kafkaEvent([]byte(full))); err == nil || !strings.Contains(err.Error(), "commit-log-0@100") {
		t.Fatalf("invoke with the cache out of reach: %v; want it failed, naming the record to retry", err)
	}
}
