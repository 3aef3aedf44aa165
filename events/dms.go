package events

import (
	"cmp"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// decodeDMS decodes a record AWS DMS wrote to a Kinesis or Kafka target in
// its JSON format: {"data": the row, "metadata": {"record-type",
// "operation", "schema-name", "table-name", "timestamp"...}}, and, on an
// update when the task's BeforeImageSettings name it so, "before-image":
// the row before (as much of it as its ColumnFilter keeps). The row is the
// one after an insert or update, the one deleted on a delete. A control
// record (a table created, altered, dropped) and a full load's rows are no
// change to a row that a cache may hold: none is appended.
func decodeDMS(f *fields, env envelope, out []Change) ([]Change, error) {
	var recordType, operation, schema, table string
	var at time.Time
	err := jsonscan.Members(f.metadata.raw, func(key, value []byte, kind jsonscan.Kind) error {
		var err error
		switch string(key) {
		case "record-type":
			recordType, err = stringField("DMS metadata record-type", value, kind)
		case "operation":
			operation, err = stringField("DMS metadata operation", value, kind)
		case "schema-name":
			schema, err = stringField("DMS metadata schema-name", value, kind)
		case "table-name":
			table, err = stringField("DMS metadata table-name", value, kind)
		case "timestamp":
			if kind == jsonscan.String {
				at, _ = parseTime(value) // ISO 8601, with up to 9 digits of fraction
			}
		}
		return err
	})
	if err != nil {
		return out, err
	}
	switch recordType {
	case "control":
		return out, nil
	case "data":
	default:
		return out, invalid("a DMS record-type must be data or control, not " + strconv.Quote(truncate([]byte(recordType))))
	}
	var op Op
	switch operation {
	case "insert":
		op = OpCreate
	case "update":
		op = OpUpdate
	case "delete":
		op = OpDelete
	case "load":
		return out, nil
	default:
		return out, invalid("a DMS data record's operation must be load, insert, update or delete, not " + strconv.Quote(truncate([]byte(operation))))
	}
	if table == "" {
		return out, invalid("a DMS record needs its metadata table-name")
	}
	row, _, err := decodeRow("DMS data", f.data.raw, 0, env.keep)
	if err != nil {
		return out, err
	}
	if row == nil {
		return out, invalid("a DMS data record needs its row (data)")
	}
	var before Image
	if f.beforeImage.raw != nil && op == OpUpdate {
		if before, _, err = decodeRow("DMS before-image", f.beforeImage.raw, 0, env.keep); err != nil {
			return out, err
		}
		if len(before) == 0 {
			before = nil // the row's key did not change, and ColumnFilter kept only it
		}
	}
	after := row
	if op == OpDelete {
		after, before = nil, row
	}
	c := rowChange(SourceDMS, qualified(schema, table), op, after, before)
	c.OccurredAt = cmp.Or(at, env.occurredAt)
	return append(out, c), nil
}

// qualified names a table as its engine does: schema.table (a MySQL
// database is its schema), or the table alone when there is no schema.
func qualified(schema, table string) string {
	if schema == "" {
		return table
	}
	return schema + "." + table
}
