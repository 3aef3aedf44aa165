package events

import (
	"cmp"
	"strconv"
	"time"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// decodeDebeziumWrapped decodes a Debezium change event in the wrapper its
// JSON converter writes with schemas on (Debezium Server's default):
// {"schema": ..., "payload": the event}. A null payload is a tombstone,
// which changes nothing.
func decodeDebeziumWrapped(f *fields, env envelope, out []Change) ([]Change, error) {
	switch f.payload.kind {
	case jsonscan.Null:
		return out, nil
	case jsonscan.Object:
	default:
		return out, invalid("a Debezium payload must be an object, not " + f.payload.kind.String())
	}
	event, err := collect(f.payload.raw)
	defer event.release()
	if err != nil {
		return out, err
	}
	if event.source.kind != jsonscan.Object || event.op.raw == nil {
		return out, invalid("a Debezium payload needs its op and source")
	}
	return decodeDebezium(&event, env, out)
}

// decodeDebezium decodes a Debezium change event: {"before", "after",
// "source": {"schema" or "db", "table", "ts_ms"...}, "op"}. op is c
// (create), u (update), d (delete); r (a snapshot's read) and m (a
// message) change no row and append nothing; t (a TRUNCATE) names no row,
// so no key can be planned from it: it fails. An unchanged TOASTed column
// the row after lacks is taken from the row before (REPLICA IDENTITY FULL).
// A record with a type is Aurora DSQL's: "full", or "chunked", whose row
// came in fragments, an Unjoined error until joined; an op it does not
// know is an upsert of the row after, as AWS advises.
func decodeDebezium(f *fields, env envelope, out []Change) ([]Change, error) {
	source, chunked := SourceDebezium, false
	if f.recordType.raw != nil {
		source = SourceDSQL
		kind, err := jsonscan.Text(f.recordType.raw)
		switch {
		case f.recordType.kind != jsonscan.String || err != nil || kind != "full" && kind != "chunked":
			return out, invalid("an Aurora DSQL record of type " + truncate(f.recordType.raw) + ": not full, chunked or fragment")
		case kind == "chunked":
			chunked = true
		}
	}
	if f.op.kind != jsonscan.String {
		return out, invalid("a Debezium op must be a string, not " + f.op.kind.String())
	}
	opText, err := jsonscan.Text(f.op.raw)
	if err != nil {
		return out, err
	}
	var schema, db, table string
	var at time.Time
	err = jsonscan.Members(f.source.raw, func(key, value []byte, kind jsonscan.Kind) error {
		var err error
		switch string(key) {
		case "schema":
			if kind != jsonscan.Null {
				schema, err = stringField("Debezium source.schema", value, kind)
			}
		case "db":
			if kind != jsonscan.Null {
				db, err = stringField("Debezium source.db", value, kind)
			}
		case "table":
			table, err = stringField("Debezium source.table", value, kind)
		case "ts_ms":
			if ms, perr := strconv.ParseInt(string(value), 10, 64); kind == jsonscan.Number && perr == nil && ms > 0 {
				at = time.UnixMilli(ms)
			}
		}
		return err
	})
	if err != nil {
		return out, err
	}
	if table == "" {
		return out, invalid("a Debezium event needs its source.table")
	}
	table = qualified(cmp.Or(schema, db), table)
	var op Op
	switch opText {
	case "c":
		op = OpCreate
	case "u":
		op = OpUpdate
	case "d":
		op = OpDelete
	case "r", "m":
		return out, nil
	case "t":
		return out, invalid("a TRUNCATE of " + truncate([]byte(table)) + " names no row: no key can be planned from it")
	default:
		if source != SourceDSQL {
			return out, invalid("a Debezium op must be c, u, d, r, t or m, not " + strconv.Quote(truncate([]byte(opText))))
		}
		op = OpUpdate // an upsert: the row after
	}
	var before, after Image
	if f.before.raw != nil {
		if before, _, err = decodeRow("Debezium before", f.before.raw, 0, env.keep); err != nil {
			return out, err
		}
	}
	if f.after.raw != nil {
		if after, _, err = decodeRow("Debezium after", f.after.raw, 0, env.keep); err != nil {
			return out, err
		}
	}
	at = cmp.Or(at, env.occurredAt)
	if chunked {
		return out, unjoined(f, Unjoined{table: table, op: op, opText: opText, at: at, keep: env.keep, before: before, after: after})
	}
	c, err := rowOf(source, table, op, opText, after, before, at)
	if err != nil {
		return out, err
	}
	return append(out, c), nil
}

// rowOf is the change of a Debezium-shaped record once its images are
// at hand.
func rowOf(source Source, table string, op Op, opText string, after, before Image, at time.Time) (Change, error) {
	switch {
	case op != OpDelete && after == nil:
		return Change{}, invalid("a Debezium " + opText + " event needs the row after (after)")
	case op == OpDelete && before == nil:
		return Change{}, invalid("a Debezium delete needs the row deleted (before)")
	}
	c := rowChange(source, table, op, after, before)
	c.OccurredAt = at
	return c, nil
}
