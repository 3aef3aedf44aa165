package events

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kinesisRecord is a record of a Lambda Kinesis event carrying data.
func kinesisRecord(seq string, data []byte) []byte {
	rec, _ := json.Marshal(map[string]any{
		"kinesis": map[string]any{"kinesisSchemaVersion": "1.0", "partitionKey": "k", "sequenceNumber": seq,
			"data": base64.StdEncoding.EncodeToString(data), "approximateArrivalTimestamp": 1796000000.123},
		"eventSource": "aws:kinesis", "eventID": "shardId-000000000000:" + seq, "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/cdc",
	})
	return rec
}

// TestCommitLogGolden: each record under testdata/cdc, as its engine wrote
// it (SOURCES.md there says where each comes from), decoded from a Kinesis
// record, has its expected changes in X.golden.json; DMS's and Debezium's
// decode the same from an SQS message's body. -update rewrites them.
func TestCommitLogGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/cdc/*.json")
	for _, file := range files {
		if strings.HasSuffix(file, ".golden.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, changes, err := Decode(SourceKinesis, kinesisRecord("4959", data), nil)
			if err != nil {
				t.Errorf("decoding %s: %v", name, err)
			}
			got, _ := json.MarshalIndent(outcome("4959", changes, err), "", "  ")
			matchGolden(t, file, got)
			if strings.HasPrefix(name, "ddb") || strings.HasPrefix(name, "dsql") {
				return
			}
			body, _ := json.Marshal(string(data))
			_, fromSQS, err := Decode(SourceSQS, []byte(`{"messageId":"m1","body":`+string(body)+`}`), nil)
			if err != nil || len(fromSQS) != len(changes) {
				t.Fatalf("from an SQS body: %d changes, %v; from Kinesis %d", len(fromSQS), err, len(changes))
			}
			for i := range changes {
				fromSQS[i].OccurredAt = changes[i].OccurredAt // the envelope's time when the record has none
				if a, b := mustJSON(t, fromSQS[i]), mustJSON(t, changes[i]); a != b {
					t.Errorf("from an SQS body:\n%s\nfrom Kinesis:\n%s", a, b)
				}
			}
		})
	}
}

// TestAChangeMessageIsNeverTakenForARow: a change message that happens to
// hold the members a commit log's record has (schema and payload, source
// and op, metadata) is still a change message.
func TestAChangeMessageIsNeverTakenForARow(t *testing.T) {
	for _, body := range []string{
		`{"entity":"product","id":"1","schema":"v2","payload":null}`,
		`{"keys":["cache:a"],"schema":1,"payload":{"x":1}}`,
		`{"entity":"product","id":"1","op":"update","source":{"app":"crm"},"after":{"id":1}}`,
		`{"tags":["t"],"metadata":{"record-type":"data"}}`,
	} {
		changes, err := DecodeSQSBody("m1", body, "")
		if err != nil || len(changes) != 1 || changes[0].Source.Rows() || (changes[0].Entity == "" && changes[0].Keys == nil && changes[0].Tags == nil) {
			t.Errorf("%s: %+v, %v; want its change message", body, changes, err)
		}
	}
}

// TestAnAuroraDSQLRecordSplitIsRefused: a part of an Aurora DSQL record
// too large for one Kinesis record fails, saying so: the worker never
// waits for parts that may come on other shards, in any order.
func TestAnAuroraDSQLRecordSplitIsRefused(t *testing.T) {
	part := []byte(`{"type":"partial","op":"u","before":null,"after":{"id":1},"source":{"schema":"public","table":"t"}}`)
	_, changes, err := Decode(SourceKinesis, kinesisRecord("4960", part), nil)
	if err == nil || len(changes) != 0 || !strings.Contains(err.Error(), "split across Kinesis records") {
		t.Fatalf("a part of a split record: %+v, %v; want it refused as one", changes, err)
	}
}
