package lambdaruntime

import "context"

// invocation is what the runtime API says of an invoke beside its payload;
// one value in the context, so one allocation for all three.
type invocation struct {
	requestID, functionARN, traceID string
}

type contextKey struct{}

var outside invocation // what a context outside an invoke has: nothing

func invocationOf(ctx context.Context) *invocation {
	if inv, ok := ctx.Value(contextKey{}).(*invocation); ok {
		return inv
	}
	return &outside
}

// RequestID is the ID of the invoke ctx serves (Lambda-Runtime-Aws-Request-Id),
// or "" outside one.
func RequestID(ctx context.Context) string { return invocationOf(ctx).requestID }

// InvokedFunctionARN is the ARN the invoke named, with its version or alias
// if it named one (Lambda-Runtime-Invoked-Function-Arn), or "" outside one.
func InvokedFunctionARN(ctx context.Context) string { return invocationOf(ctx).functionARN }

// TraceID is the invoke's X-Ray trace header (Lambda-Runtime-Trace-Id), or
// "". With several invokes at once (AWS_LAMBDA_MAX_CONCURRENCY) it is the
// only place to find it: _X_AMZN_TRACE_ID is set only when there is one.
func TraceID(ctx context.Context) string { return invocationOf(ctx).traceID }
