package invalidate

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/events"
)

// cdcChange decodes a record of events/testdata/cdc, as its engine wrote
// it, from a Kinesis record.
func cdcChange(t *testing.T, name string) events.Change {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "events", "testdata", "cdc", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	raw := `{"kinesis":{"sequenceNumber":"1","data":"` + base64.StdEncoding.EncodeToString(data) + `"},"eventSourceARN":"arn:aws:kinesis:us-east-1:1:stream/cdc"}`
	_, changes, err := events.Decode(events.SourceKinesis, []byte(raw), nil)
	if err != nil || len(changes) != 1 {
		t.Fatalf("%s: %d changes, %v", name, len(changes), err)
	}
	return changes[0]
}

// TestRowsArePlannedByTheirTable: a database's rows, from DMS, Debezium
// and Aurora DSQL, are planned by the rules' tables as DynamoDB items are; an
// {item.} placeholder over a row whose old value the source did not send
// fails, saying what to turn on, rather than invalidate the new value
// alone.
func TestRowsArePlannedByTheirTable(t *testing.T) {
	r := mustRules(t, `
tables:
  public.profile: ["cache:profile:{key.id}", "cache:color:{item.color}"]
  inventory.customers: ["cache:customer:{key.id}", "cache:bio:{new.biography}"]
  public.foo: ["cache:foo:{key.id}", "cache:foo-name:{item.name}"]
  public.order_items: ["cache:order:{key.order_id}:{key.item_id}", "cache:quantity:{item.quantity}"]
`)
	for _, tc := range []struct {
		record string
		keys   []string
		err    string
	}{
		{"debezium-pg-create", []string{"cache:profile:1", "cache:color:blue"}, ""},
		{"debezium-pg-update", []string{"cache:profile:1"}, "REPLICA IDENTITY FULL"},
		{"debezium-pg-delete", []string{"cache:profile:1"}, "NULL"},
		{"debezium-pg-update-toast", []string{"cache:customer:1004"}, "did not send the value"},
		{"dms-update-before-image", []string{"cache:foo:45", "cache:foo:46"}, "BeforeImageSettings"}, // the key changed: both
		{"dms-delete-pg", []string{"cache:foo:45"}, "REPLICA IDENTITY FULL"},
		{"dms-insert", nil, "give its table a rule"},
		{"dsql-cdc-insert", []string{"cache:order:1001:42", "cache:quantity:5"}, ""},
		{"dsql-cdc-unknown-op", []string{"cache:order:1001:42"}, "Aurora DSQL sends no row before an update"}, // an upsert
		{"dsql-cdc-delete", []string{"cache:order:1001:42"}, "Aurora DSQL"},
	} {
		c := cdcChange(t, tc.record)
		keys, err := r.Keys(&c, nil)
		for _, want := range tc.keys {
			if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, want) }) {
				t.Errorf("%s: keys %v, want %s", tc.record, keys, want)
			}
		}
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want an error saying %q", tc.record, err, tc.err)
		}
	}
}
