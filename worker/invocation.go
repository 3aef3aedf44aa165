package worker

import (
	"context"
	"log/slog"
)

// Invocation names the call a batch came in: for a Lambda function, the
// invoke's request ID and X-Ray trace header. The worker's log lines, its
// EMF line and the records it parks carry them, so that one invoke's lines
// can be found in CloudWatch and a parked record traced to its invoke.
type Invocation struct {
	RequestID string
	TraceID   string
}

type invocationKey struct{}

// WithInvocation returns ctx carrying inv, for a front end to pass to the
// worker's handlers.
func WithInvocation(ctx context.Context, inv Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// invocationOf returns the invocation ctx carries, or the zero one.
func invocationOf(ctx context.Context) Invocation {
	inv, _ := ctx.Value(invocationKey{}).(Invocation)
	return inv
}

// invocationHandler adds the invocation of a line's context to the line.
type invocationHandler struct{ slog.Handler }

func (h invocationHandler) Handle(ctx context.Context, r slog.Record) error {
	if inv := invocationOf(ctx); inv.RequestID != "" || inv.TraceID != "" {
		r = r.Clone()
		if inv.RequestID != "" {
			r.AddAttrs(slog.String("request_id", inv.RequestID))
		}
		if inv.TraceID != "" {
			r.AddAttrs(slog.String("trace_id", inv.TraceID))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h invocationHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return invocationHandler{h.Handler.WithAttrs(attrs)}
}

func (h invocationHandler) WithGroup(name string) slog.Handler {
	return invocationHandler{h.Handler.WithGroup(name)}
}
