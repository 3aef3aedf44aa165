// Package wait pauses a goroutine for a while unless its context ends
// first: the pause between polls and retries of the loops that read
// queues and streams.
package wait

import (
	"context"
	"time"
)

// For waits d, or until ctx ends; it reports whether the whole d passed.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
