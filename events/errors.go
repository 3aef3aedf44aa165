package events

import (
	"errors"
	"strconv"
)

// errInvalid is wrapped by every decoding error: the record can never be
// handled as it is, and belongs in a dead-letter queue once retries end.
var errInvalid = errors.New("invalid change event")

// decodeError says which record could not be decoded and why.
type decodeError struct {
	Record string // message ID or sequence number
	Reason string
	Err    error // the underlying error, if any
}

func (e *decodeError) Error() string {
	msg := "record " + strconv.Quote(e.Record) + ": " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap exposes errInvalid and the underlying error to errors.Is and As.
func (e *decodeError) Unwrap() []error {
	if e.Err == nil {
		return []error{errInvalid}
	}
	return []error{errInvalid, e.Err}
}

// fieldError is a reason found deep in a body; the record decoder turns it
// into a decodeError naming the record.
type fieldError struct {
	reason string
	err    error
	limit  bool // past a limit of the record's (maxChanges, ...): decoding stops
}

func (e *fieldError) Error() string { return e.reason }

func invalid(reason string) error { return &fieldError{reason: reason} }

func pastLimit(what string, max int) error {
	return &fieldError{reason: "more than " + strconv.Itoa(max) + " " + what + " in one record", limit: true}
}

func isPastLimit(err error) bool {
	fe := (*fieldError)(nil)
	return errors.As(err, &fe) && fe.limit
}

func recordError(record string, err error) error {
	if fe := (*fieldError)(nil); errors.As(err, &fe) {
		return &decodeError{Record: record, Reason: fe.reason, Err: fe.err}
	}
	return &decodeError{Record: record, Reason: "malformed JSON", Err: err}
}
