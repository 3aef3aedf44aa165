package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"hash/crc32"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
	"github.com/invalidator-go/invalidator/worker/failurequeue"
	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

// dsqlSplit is an Aurora DSQL insert of public.order_items whose row after
// is text, as AWS's "Handling oversized records" has it: its main record
// (sequence number 100) and the text cut at cuts into fragments (101, ...),
// each the data of a Kinesis record of a Lambda event.
func dsqlSplit(text string, cuts ...int) (main []byte, fragments [][]byte) {
	record := func(seq int, data any) []byte {
		body, _ := json.Marshal(data)
		raw, _ := json.Marshal(map[string]any{"eventSource": "aws:kinesis", "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/dsql",
			"kinesis": map[string]any{"sequenceNumber": strconv.Itoa(seq), "partitionKey": "random", "data": base64.StdEncoding.EncodeToString(body)}})
		return raw
	}
	main = record(100, map[string]any{"type": "chunked", "op": "c", "before": nil, "after": nil,
		"source": map[string]any{"version": "1.0", "ts_ms": 1705318200000, "schema": "public", "table": "order_items", "db": "postgres"},
		"chunked": map[string]any{"after": map[string]any{"chunk_id": "c-1", "total_fragments": len(cuts) + 1,
			"crc32c": strconv.FormatUint(uint64(crc32.Checksum([]byte(text), crc32.MakeTable(crc32.Castagnoli))), 10)}}})
	for i, from := range append([]int{0}, cuts...) {
		to := len(text)
		if i < len(cuts) {
			to = cuts[i]
		}
		fragments = append(fragments, record(101+i, map[string]any{"type": "fragment", "chunk_id": "c-1", "index": i, "data": text[from:to]}))
	}
	return main, fragments
}

func kinesisPayload(records ...[]byte) []byte {
	return []byte(`{"Records":[` + string(joinBytes(records)) + `]}`)
}

func joinBytes(records [][]byte) []byte {
	parts := make([]string, len(records))
	for i, r := range records {
		parts[i] = string(r)
	}
	return []byte(strings.Join(parts, ","))
}

// TestAnAuroraDSQLRowInFragmentsIsPlannedInItsBatch: through the Kinesis
// front end, a DSQL record whose row came in fragments has its keys
// deleted when its fragments came in its batch, all of them or the first
// holding the columns its keys read; otherwise it is parked at once with
// its reason, a key over a column past its first fragment included, and
// the fragments, which change nothing by themselves, are done.
func TestAnAuroraDSQLRowInFragmentsIsPlannedInItsBatch(t *testing.T) {
	rules, err := invalidate.ParseRules([]byte(`{dsqlTables: [public.order_items], tables: {public.order_items: ["cache:order:{new.order_id}"]},
		tags: {tables: {public.order_items: ["item:{new.item_id}"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	row := `{"order_id": 1001, "note": "` + strings.Repeat("x", 100) + `", "item_id": 42}`
	cut := strings.Index(row, "xxx") + 50
	main, fragments := dsqlSplit(row, cut)
	for name, tc := range map[string]struct {
		batch  [][]byte
		parked string // the main record's reason, when it is parked
	}{
		"all its fragments":         {batch: [][]byte{fragments[1], main, fragments[0]}},
		"fragment 0 alone":          {batch: [][]byte{main, fragments[0]}, parked: `placeholder {new.item_id} is not in the part of the row that came: the first 17 bytes of the row after, its fragment 0 of 2`},
		"a fragment, not the first": {batch: [][]byte{main, fragments[1]}, parked: `1 of the 2 fragments of its row after (chunk_id "c-1") are at hand, not its fragment 0`},
		"no fragment":               {batch: [][]byte{main}, parked: `0 of the 2 fragments`},
	} {
		t.Run(name, func(t *testing.T) {
			sqsFake := &queuestest.SQS{}
			var mu sync.Mutex
			unlinked := map[string]bool{}
			cache := &cachetest.Cache{Unlinked: func(_ context.Context, keys []string) {
				mu.Lock()
				defer mu.Unlock()
				for _, k := range keys {
					unlinked[k] = true
				}
			}}
			w := New(invalidate.New(cache, invalidate.Options{Rules: rules, Backoff: time.Millisecond}), Options{Logger: slog.New(slog.DiscardHandler),
				Metrics: io.Discard, DeadlineMargin: 100 * time.Millisecond, Park: failurequeue.Queue{Client: sqsFake, URL: failureURL}, Queues: sqsFake})
			out, err := w.Lambda(deadline(t), events.SourceKinesis, kinesisPayload(tc.batch...))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range out.Records {
				want := Done
				if r.ID == "100" && tc.parked != "" {
					want = Parked
				}
				if r.Fate != want {
					t.Errorf("record %d (%s): %v, %v; want %v", i, r.ID, r.Fate, r.Err, want)
				}
			}
			if tc.parked == "" {
				if mu.Lock(); !unlinked["cache:order:1001"] {
					t.Errorf("cache:order:1001 not deleted; results %+v", out.Report.Results)
				}
				mu.Unlock()
				return
			}
			p := parked(t, sqsFake)
			if len(p) != 1 || p[0].ID != "100" || !strings.Contains(p[0].Reason, tc.parked) {
				t.Fatalf("parked %+v; want the main record alone, for %q", p, tc.parked)
			}
		})
	}
}
