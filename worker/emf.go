package worker

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/internal/jsonstring"
	"github.com/invalidator-go/invalidator/invalidate"
)

// figure is one count of a batch: its batch-line field, its metric.
type figure struct {
	field, metric string // a field ending in _ms is a time in milliseconds, else a count
	value         int64
}

// figures are a batch's counts, in the batch line and the EMF line alike.
// Those of tags appear only when the batch had some, those of the
// announcements only when the worker announces: each field is log bytes
// that every invoke pays for.
func figures(m invalidate.Metrics, parked int, later scheduled, announced announcements, announcing bool) []figure {
	out := []figure{
		{"records", "Records", int64(m.Records)}, {"failed", "FailedRecords", int64(m.Failed)}, {"parked", "ParkedRecords", int64(parked)},
		{"keys_deleted", "KeysDeleted", int64(m.KeysDeleted)}, {"keys_absent", "KeysAbsent", int64(m.KeysAbsent)}, {"keys_failed", "KeysFailed", int64(m.KeysFailed)},
		{"again_scheduled", "AgainScheduled", int64(later.keys)}, {"ecpus", "ECPUs", m.ECPUs},
	}
	if m.TagsInvalidated+m.TagsFailed+later.tags > 0 {
		out = append(out, figure{"tags_invalidated", "TagsInvalidated", int64(m.TagsInvalidated)}, figure{"tags_failed", "TagsFailed", int64(m.TagsFailed)},
			figure{"tag_entries_deleted", "TagEntriesDeleted", int64(m.TagEntriesDeleted)}, figure{"again_tags_scheduled", "", int64(later.tags)})
	}
	if m.Throttled > 0 {
		out = append(out, figure{"throttled", "ThrottledCommands", m.Throttled})
	}
	if m.FleetDown {
		out = append(out, figure{"fleet_budget_down", "FleetBudgetDown", 1})
	}
	if announcing {
		out = append(out, figure{"announcements", "Announcements", int64(announced.messages)}, figure{"announce_failed_keys", "AnnounceFailedKeys", int64(announced.failed)})
	}
	return append(out, figure{"max_lag_ms", "MaxLag", m.MaxLag.Milliseconds()})
}

// writeEMF writes one CloudWatch Embedded Metric Format line of figs (those
// with a metric name), with the invoke's request ID, if any, as a
// property, and the cause, if any, as a dimension beside the function and
// the source: CloudWatch Logs turns it into metrics without any API call
// from the function. Each metric declared is also a top-level member, or
// CloudWatch drops it. The line is written directly: json.Marshal of maps
// slowed the first invoke of every cold start (bench/README.md).
func writeEMF(w io.Writer, namespace, function, requestID string, source events.Source, cause string, figs []figure, now time.Time) error {
	b := make([]byte, 0, 1024)
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":`...)
	b = jsonstring.Append(b, namespace)
	if cause == "" {
		b = append(b, `,"Dimensions":[["Function","Source"]],"Metrics":[`...)
	} else {
		b = append(b, `,"Dimensions":[["Function","Source","Cause"]],"Metrics":[`...)
	}
	first := true
	for _, f := range figs {
		if f.metric == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		unit := "Count"
		if strings.HasSuffix(f.field, "_ms") {
			unit = "Milliseconds"
		}
		b = append(b, `{"Name":"`+f.metric+`","Unit":"`+unit+`"}`...)
	}
	b = append(b, `]}]},"Function":`...)
	b = jsonstring.Append(b, function)
	b = append(b, `,"Source":`...)
	b = jsonstring.Append(b, string(source))
	if cause != "" {
		b = append(b, `,"Cause":`...)
		b = jsonstring.Append(b, cause)
	}
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = jsonstring.Append(b, requestID)
	}
	for _, f := range figs {
		if f.metric != "" {
			b = append(b, `,"`+f.metric+`":`...)
			b = strconv.AppendInt(b, f.value, 10)
		}
	}
	_, err := w.Write(append(b, "}\n"...))
	return err
}
