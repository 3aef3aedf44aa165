package poller

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"time"
)

// logStats writes a line of the process's goroutines and memory every
// every, until ctx ends: a poller runs for weeks, and a leak shows there
// first.
func logStats(ctx context.Context, log *slog.Logger, every time.Duration) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		log.Info("runtime", "goroutines", runtime.NumGoroutine(),
			"heap_bytes", samples[0].Value.Uint64(), "go_memory_bytes", samples[1].Value.Uint64())
	}
}
