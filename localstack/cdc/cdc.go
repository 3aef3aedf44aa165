package cdc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
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

// Read takes the changes waiting in slot, a wal2json slot, through psql
// (the command and its connection options, printing rows bare): each as a
// Debezium change event, in commit order, and nothing for what changes no
// row. Taken, they are gone from the slot, as a reader's confirmed ones.
func Read(ctx context.Context, psql []string, slot, database string) ([][]byte, error) {
	query := "SELECT data FROM pg_logical_slot_get_changes('" + strings.ReplaceAll(slot, "'", "''") +
		"', NULL, NULL, 'format-version', '2', 'include-timestamp', '1', 'include-transaction', 'false')"
	cmd := exec.CommandContext(ctx, psql[0], append(psql[1:], "-c", query)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("reading slot %s: %w: %s", slot, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var events [][]byte
	for line := range bytes.Lines(out) {
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		event, err := Debezium(line, database)
		if err != nil {
			return events, err
		}
		if event != nil {
			events = append(events, event)
		}
	}
	return events, nil
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
