package events

import (
	"os"
	"testing"
)

// TestRecordsTellTheirSourceAndPlace: every record of the golden payloads
// is told by its shape as the source it came from, and a stream record's
// position is read from it whole and without its images; a message body
// is no record.
func TestRecordsTellTheirSourceAndPlace(t *testing.T) {
	for file, want := range map[string]Source{"sqs-raw.json": SourceSQS, "sns.json": SourceSNS, "dynamodb.json": SourceDynamoDB} {
		data, err := os.ReadFile("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		raws, err := SplitRecords(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range raws {
			if got, ok := SourceOf(raw); !ok || got != want {
				t.Errorf("%s: a record told as %q (%v): %.80s", file, got, ok, raw)
			}
			if want != SourceDynamoDB {
				continue
			}
			short, err := WithoutImages(raw)
			if err != nil {
				t.Fatal(err)
			}
			seq, _, _ := DecodeDynamoDBJSON(raw, nil)
			for _, r := range [][]byte{raw, short} {
				arn, at, err := StreamPosition(r)
				if err != nil || at != seq || arn == "" {
					t.Errorf("%s: position %q %q, %v, want sequence number %q: %.80s", file, arn, at, err, seq, r)
				}
			}
		}
	}
	for _, body := range []string{`{"entity":"user","id":"1"}`, `[{"keys":["k"]}]`, `not json`, `{"body":"x"`} {
		if source, ok := SourceOf([]byte(body)); ok {
			t.Errorf("%s told as a record from %q", body, source)
		}
	}
	if _, _, err := StreamPosition([]byte(`{"eventID":"1","dynamodb":{}}`)); err == nil {
		t.Error("a stream record without its position has one")
	}
}
