package invalidate

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// errInternal is wrapped by the errors of a bug caught while decoding or
// sending: the record fails for good, so that it is parked, not retried
// forever.
var errInternal = errors.New("internal error")

// PanicError is the error of a panic p caught while doing what: it wraps
// errInternal, and carries the stack where it happened to the logs and the
// failure queue.
func PanicError(what string, p any) error {
	return fmt.Errorf("%w %s: %v\n%s", errInternal, what, p, debug.Stack())
}

// errNotAttempted fails the keys that the deadline left unsent.
var errNotAttempted = errors.New("not attempted before the deadline")

// keyError says which keys of a record could not be deleted and why.
type keyError struct {
	Failed int   // keys of the record not deleted
	Err    error // the error of one of them: one that may pass, when any may
}

func (e *keyError) Error() string {
	return fmt.Sprintf("%d key(s) not deleted: %v", e.Failed, e.Err)
}

func (e *keyError) Unwrap() error { return e.Err }

// lastError is a key's latest failure. When the deadline cut short the
// attempt, the failure that kept the key retrying until then says more, and
// is kept beside it.
func lastError(err, before error) error {
	if before == nil || !isContextError(err) || isContextError(before) {
		return err
	}
	return fmt.Errorf("%w, after %w", err, before)
}

func isContextError(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// tagError says which tag of a record could not be invalidated and why.
type tagError struct {
	Tag string
	Err error // one that may pass, when any may
}

func (e *tagError) Error() string {
	return fmt.Sprintf("tag %q not invalidated: %v", e.Tag, e.Err)
}

func (e *tagError) Unwrap() error { return e.Err }
