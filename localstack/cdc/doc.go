// Package cdc is the local stand-in for a managed commit-log reader (AWS
// DMS, Debezium): it reads a PostgreSQL logical replication slot through
// wal2json and writes each row's change as Debezium's PostgreSQL connector
// does, bare (schemas off), for the Kinesis function to decode.
//
// Where it differs from Debezium: numbers, NUMERIC included, are JSON
// numbers as wal2json gives them (Debezium's default writes NUMERIC as
// bytes: decimal.handling.mode=string or double are closer); a delete's row
// before holds the replica identity's columns alone (Debezium adds the
// others as null); an update's row before is sent when the replica identity
// is FULL, as Debezium sends it, and not when only a key changed; a row
// whose key changed is one update, where Debezium sends a delete, a
// tombstone and a create (the rules' {key.} reads both rows of an update:
// the same keys); there is no snapshot (op r), no transaction metadata and
// no schema wrapper.
package cdc
