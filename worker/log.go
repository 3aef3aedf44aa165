package worker

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// NewLogger writes JSON lines of level and above to w, timed in UTC: the same
// on every host, and formatting them never loads the local time zone, which
// slowed a fresh process's first log line (bench/README.md, "Cold start").
// A line logged with a context that carries an Invocation names it.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(invocationHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: utc})})
}

func utc(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}

// LogStartFailure writes the one line that says why name cannot start.
func LogStartFailure(name string, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	NewLogger(os.Stderr, slog.LevelInfo).Error("cannot start", "function", name, "error", msg)
}
