package worker

import (
	"encoding/json"
	"io"
	"time"

	"github.com/invalidator-go/invalidator/invalidate"
)

// emfMetrics are the metric definitions of every batch line, fixed.
var emfMetrics = []map[string]string{
	{"Name": "Records", "Unit": "Count"},
	{"Name": "FailedRecords", "Unit": "Count"},
	{"Name": "KeysDeleted", "Unit": "Count"},
	{"Name": "KeysAbsent", "Unit": "Count"},
	{"Name": "KeysFailed", "Unit": "Count"},
	{"Name": "MaxLag", "Unit": "Milliseconds"},
}

// writeEMF writes one CloudWatch Embedded Metric Format line: CloudWatch
// Logs turns it into metrics without any API call from the function.
func writeEMF(w io.Writer, namespace, function, source string, m invalidate.Metrics, now time.Time) error {
	line, err := json.Marshal(map[string]any{
		"_aws": map[string]any{
			"Timestamp": now.UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  namespace,
				"Dimensions": [][]string{{"Function", "Source"}},
				"Metrics":    emfMetrics,
			}},
		},
		"Function":      function,
		"Source":        source,
		"Records":       m.Records,
		"FailedRecords": m.Failed,
		"KeysDeleted":   m.KeysDeleted,
		"KeysAbsent":    m.KeysAbsent,
		"KeysFailed":    m.KeysFailed,
		"MaxLag":        m.MaxLag.Milliseconds(),
	})
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
