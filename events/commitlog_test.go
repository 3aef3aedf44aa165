package events

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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
			if err != nil && !errors.As(err, new(*Unjoined)) { // a main record is joined with its fragments
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

// split is an Aurora DSQL record whose row after is text, split at cuts
// into fragments, as the page's "Handling oversized records" shows them:
// its main record (testdata's, with its chunk ID and CRC32C) and the
// fragments, each decoded from its own Kinesis record.
func split(t *testing.T, text string, cuts ...int) (main Delivery, err error, fragments [][]byte) {
	t.Helper()
	golden, err := os.ReadFile("testdata/cdc/dsql-cdc-chunked.json")
	if err != nil {
		t.Fatal(err)
	}
	rec := strings.NewReplacer("{{chunk-id}}", "c-1", `"total_fragments": 3`, `"total_fragments": `+strconv.Itoa(len(cuts)+1),
		"2073618257", strconv.FormatUint(uint64(crc32.Checksum([]byte(text), crc32.MakeTable(crc32.Castagnoli))), 10)).Replace(string(golden))
	main, changes, err := Decode(SourceKinesis, kinesisRecord("100", []byte(rec)), nil)
	if len(changes) != 0 {
		t.Fatalf("a main record alone planned %+v", changes)
	}
	for i, from := range append([]int{0}, cuts...) {
		to := len(text)
		if i < len(cuts) {
			to = cuts[i]
		}
		piece := mustFragment(i, text[from:to])
		raw := kinesisRecord(strconv.Itoa(101+i), piece)
		if _, changes, ferr := Decode(SourceKinesis, raw, nil); len(changes) != 0 || ferr != nil {
			t.Fatalf("fragment %d: %+v, %v; want nothing planned, no error", i, changes, ferr)
		}
		fragments = append(fragments, raw)
	}
	return main, err, fragments
}

// joinOf joins the main record's error with the fragments given.
func joinOf(t *testing.T, err error, fragments ...[]byte) ([]Change, error) {
	t.Helper()
	u := (*Unjoined)(nil)
	if !errors.As(err, &u) {
		t.Fatalf("the main record's error %v is not Unjoined", err)
	}
	fs := &Fragments{}
	for _, raw := range fragments {
		f, ok := FragmentOf(raw)
		if !ok {
			t.Fatalf("FragmentOf(%s): not a fragment", raw)
		}
		fs.Add(f)
	}
	return u.Join(fs)
}

// TestAnAuroraDSQLRowInFragmentsIsJoined: an Aurora DSQL record whose row
// came in fragments is the change its whole record would be once the
// fragments of its batch are joined, in any order, one twice; with its
// fragment 0 alone, the columns that fragment holds whole, a number cut
// short excluded; without fragment 0, or with fragments that fail their
// CRC32C, it fails, saying so. A fragment alone plans nothing.
func TestAnAuroraDSQLRowInFragmentsIsJoined(t *testing.T) {
	row := `{"order_id": 1001, "item_id": 4242, "quantity": 5, "note": "` + strings.Repeat("é", 40) + `"}`
	cut := strings.Index(row, "4242") + 2 // fragment 0 ends inside item_id's digits
	main, err, fragments := split(t, row, cut, cut+30)
	full, _ := os.ReadFile("testdata/cdc/dsql-cdc-insert.json")
	full = []byte(strings.Replace(string(full), `{"order_id": 1001, "item_id": 42, "quantity": 5, "price": "29.99"}`, row, 1))
	_, want, werr := Decode(SourceKinesis, kinesisRecord("100", full), nil)
	if werr != nil || len(want) != 1 {
		t.Fatalf("the whole record: %+v, %v", want, werr)
	}
	got, jerr := joinOf(t, err, fragments[2], fragments[0], fragments[1], fragments[2])
	if jerr != nil || len(got) != 1 || got[0].RowPart != "" || mustJSON(t, got[0].NewImage) != mustJSON(t, want[0].NewImage) || got[0].Table != "public.order_items" || got[0].Op != OpCreate {
		t.Fatalf("joined: %+v, %v; want the whole record's %+v", got, jerr, want)
	}
	got, jerr = joinOf(t, err, fragments[0])
	if jerr != nil || len(got) != 1 || got[0].RowPart == "" || len(got[0].NewImage) != 1 || got[0].NewImage["order_id"].S != "1001" {
		t.Fatalf("fragment 0 alone: %+v, %v; want order_id alone, and the part named", got, jerr)
	}
	if _, jerr = joinOf(t, err, fragments[1], fragments[2]); jerr == nil || !strings.Contains(jerr.Error(), "2 of the 3 fragments") || !strings.Contains(jerr.Error(), `record "100"`) {
		t.Fatalf("without fragment 0: %v; want it refused, saying how many came", jerr)
	}
	main, err, fragments = split(t, row, cut)
	if got, jerr = joinOf(t, err, fragments[0], fragments[0]); jerr != nil || len(got) != 1 || got[0].RowPart == "" {
		t.Fatalf("fragment 0 of 2, twice: %+v, %v; want it counted once: the part it holds", got, jerr)
	}
	_, tampered, _ := split(t, strings.Replace(row, "1001", "1002", 1), cut)
	if _, jerr = joinOf(t, tampered, fragments...); jerr == nil || !strings.Contains(jerr.Error(), "CRC32C") {
		t.Fatalf("fragments of another text: %v; want the CRC32C refusing them", jerr)
	}
	if main.ID != "100" {
		t.Fatalf("main record's delivery %+v", main)
	}
	_, err, fragments = split(t, row, cut, cut+30)
	empty := strings.Replace(string(fragments[1]), base64.StdEncoding.EncodeToString(mustFragment(1, row[cut:cut+30])), base64.StdEncoding.EncodeToString(mustFragment(1, "")), 1)
	if _, jerr = joinOf(t, err, []byte(empty), []byte(empty), fragments[2]); jerr == nil || !strings.Contains(jerr.Error(), "2 of the 3") {
		t.Fatalf("an empty fragment twice: %v; want it counted once", jerr)
	}
}

func mustFragment(i int, data string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "fragment", "chunk_id": "c-1", "index": i, "data": data})
	return b
}

// TestAnAuroraDSQLImageItsKeysDoNotReadIsLeftOut: a main record whose
// row after is inline and row before chunked (a null entry beside it) is
// planned from the row after, the row before left out without its
// fragments.
func TestAnAuroraDSQLImageItsKeysDoNotReadIsLeftOut(t *testing.T) {
	rec := `{"type":"chunked","op":"u","before":null,"after":{"id":7},"source":{"schema":"public","table":"t"},` +
		`"chunked":{"after":null,"before":{"chunk_id":"b","total_fragments":2,"crc32c":"1"}}}`
	_, _, err := Decode(SourceKinesis, kinesisRecord("7", []byte(rec)), nil)
	changes, jerr := joinOf(t, err)
	if jerr != nil || len(changes) != 1 || changes[0].NewImage["id"].S != "7" || changes[0].OldImage != nil {
		t.Fatalf("%+v, %v; want the row after, the row before left out", changes, jerr)
	}
}

// FuzzDSQLFragments: whatever a row's text and wherever its fragments are
// cut, joining them never panics, and all of them join into the row's
// columns or fail; fragment 0 alone gives no column the whole row lacks.
func FuzzDSQLFragments(f *testing.F) {
	f.Add(`{"order_id": 1001, "item_id": 4242, "note": "é"}`, 20)
	f.Add(`{"a": [1, {"b": "}"}], "c": 1e5}`, 9)
	f.Add(`{"a":"\u00e9\"","b":null}`, 7)
	f.Fuzz(func(t *testing.T, row string, cut int) {
		if cut <= 0 || cut >= len(row) || !utf8.ValidString(row) || !utf8.ValidString(row[:cut]) {
			return
		}
		_, err, fragments := split(t, row, cut)
		whole, werr := joinOf(t, err, fragments...)
		part, _ := joinOf(t, err, fragments[0])
		if werr != nil || len(part) == 0 {
			return
		}
		for col, v := range part[0].NewImage {
			if strings.Count(row, `"`+col+`"`) > 1 {
				continue // a column twice: the row's last, fragment 0's first
			}
			if w, ok := whole[0].NewImage[col]; !ok || mustJSON(t, w) != mustJSON(t, v) {
				t.Fatalf("fragment 0 of %q gave %s = %s; the whole row %s", row, col, mustJSON(t, v), mustJSON(t, w))
			}
		}
	})
}

// TestManyRecordsNamingOneChunkJoinItOnce: a batch whose records all name
// one chunk — redeliveries, or a hostile batch — joins and decodes its
// image once, not once a record: 5,000 records over a 2 MB row take
// milliseconds, where decoding it for each would take tens of seconds.
func TestManyRecordsNamingOneChunkJoinItOnce(t *testing.T) {
	row := `{"order_id": 1001, "note": "` + strings.Repeat("z", 2<<20) + `"}`
	_, err, fragments := split(t, row, 1<<20)
	fs := &Fragments{}
	for _, raw := range fragments {
		f, _ := FragmentOf(raw)
		fs.Add(f)
	}
	u := (*Unjoined)(nil)
	if !errors.As(err, &u) {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range 5000 {
			if changes, err := u.Join(fs); err != nil || len(changes[0].NewImage["note"].S) != 2<<20 {
				done <- fmt.Errorf("%v, %d changes", err, len(changes))
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("5,000 joins of one chunk took over 10 s: the image is decoded for each")
	}
}
