package cdc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// change is one row's change as wal2json's format version 2 writes it.
type change struct {
	Action    string   `json:"action"` // I, U, D, T; B and C begin and commit a transaction, M is a message
	Timestamp string   `json:"timestamp"`
	Schema    string   `json:"schema"`
	Table     string   `json:"table"`
	Columns   []column `json:"columns"`
	Identity  []column `json:"identity"`
}

type column struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// Read reads up to limit changes waiting in slot, a wal2json slot, over
// db: each as a Debezium change event, in commit order, nothing for
// what changes no row, and the LSN that confirms them (Confirm), "" when
// none. Until confirmed they are read again, as a Debezium connector reads
// again from its last committed offset: a reader stopped between reading
// and confirming loses nothing, and sends some twice. limit 0: no limit;
// PostgreSQL ends a read at a transaction's end, whatever the limit.
func Read(ctx context.Context, db *pgx.Conn, slot string, database string, limit int) (events [][]byte, upto string, err error) {
	var n *int // NULL: no limit
	if limit > 0 {
		n = &limit
	}
	rows, err := db.Query(ctx, "SELECT lsn::text, data FROM pg_logical_slot_peek_changes($1, NULL, $2, "+
		"'format-version', '2', 'include-timestamp', '1', 'include-transaction', 'true')", slot, n)
	if err != nil {
		return nil, "", fmt.Errorf("reading slot %s: %w", slot, err)
	}
	defer rows.Close()
	var pending [][]byte // of a transaction not seen to end: read again
	for rows.Next() {
		var lsn string
		var data []byte
		if err := rows.Scan(&lsn, &data); err != nil {
			return nil, "", fmt.Errorf("reading slot %s: %w", slot, err)
		}
		if bytes.HasPrefix(data, []byte(`{"action":"C"`)) {
			// A commit's LSN is its record's end: confirmed, the
			// transaction is not read again.
			events, upto, pending = append(events, pending...), lsn, nil
			continue
		}
		event, err := Debezium(data, database)
		if err != nil {
			return events, upto, err
		}
		if event != nil {
			pending = append(pending, event)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("reading slot %s: %w", slot, err)
	}
	return events, upto, nil
}

// Confirm tells slot that its changes up to lsn (Read's) are handled: they
// are not read again, and PostgreSQL may drop their WAL.
func Confirm(ctx context.Context, db *pgx.Conn, slot, lsn string) error {
	if _, err := db.Exec(ctx, "SELECT pg_replication_slot_advance($1, $2::pg_lsn)", slot, lsn); err != nil {
		return fmt.Errorf("confirming slot %s to %s: %w", slot, lsn, err)
	}
	return nil
}

// Debezium is the Debezium change event of a wal2json change (format
// version 2) from database; nil for what changes no row.
func Debezium(wal2json []byte, database string) ([]byte, error) {
	var c change
	if err := json.Unmarshal(wal2json, &c); err != nil {
		return nil, fmt.Errorf("a wal2json change: %w", err)
	}
	ev := struct {
		Before map[string]json.RawMessage `json:"before"`
		After  map[string]json.RawMessage `json:"after"`
		Source map[string]any             `json:"source"`
		Op     string                     `json:"op"`
		TsMs   int64                      `json:"ts_ms"`
	}{Source: map[string]any{"version": "invalidator-local", "connector": "postgresql", "name": "local", "db": database,
		"schema": c.Schema, "table": c.Table, "snapshot": "false"}, TsMs: time.Now().UnixMilli()}
	if at, err := time.Parse("2006-01-02 15:04:05.999999-07", c.Timestamp); err == nil {
		ev.Source["ts_ms"] = at.UnixMilli()
	}
	switch c.Action {
	case "I":
		ev.Op, ev.After = "c", row(c.Columns)
	case "U":
		ev.Op, ev.After = "u", row(c.Columns)
		if len(c.Identity) == len(c.Columns) { // REPLICA IDENTITY FULL
			ev.Before = row(c.Identity)
		}
	case "D":
		ev.Op, ev.Before = "d", row(c.Identity)
	case "T":
		ev.Op = "t"
	default:
		return nil, nil
	}
	return json.Marshal(ev)
}

func row(cols []column) map[string]json.RawMessage {
	r := make(map[string]json.RawMessage, len(cols))
	for _, c := range cols {
		r[c.Name] = c.Value
	}
	return r
}
