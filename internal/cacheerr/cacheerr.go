// Package cacheerr says what an error met on a command to the cache means,
// for each question its callers ask: whether it may pass when the command
// is sent again (the worker retries it, and parks a record for any other
// error), whether the cache is down (writethrough's breaker and fallback),
// whether it is the cache refusing the login, throttling, or failing over.
// docs/operations.md says why each class is where it is.
package cacheerr

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// ErrCredentials marks a failure to get a new connection's credentials —
// an IAM token, the password a secret holds —: the cache was not asked.
var ErrCredentials = errors.New("cannot get the cache's credentials")

// Transient reports whether err, met on a command to the cache, may pass
// when the command is sent again. The list is closed: the cache out of
// reach or the attempt's time up, the cache in motion, full or busy, the
// login refused (the credentials are read again); every other error — any
// other reply, a reply of an unexpected shape, a bug — comes back however
// often the command is sent.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if unreachable(err) {
		return true
	}
	var reply *valkey.ValkeyError
	return errors.As(err, &reply) && transientReply(reply)
}

// unreachable tells the errors of a command that never got its answer:
// the connection refused, lost, timed out or closing, the TLS handshake or
// the credentials failing, the slot's node not known yet, the attempt's
// context done.
func unreachable(err error) bool {
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var headerErr tls.RecordHeaderError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, valkey.ErrClosing) || errors.Is(err, valkey.ErrNoSlot) || errors.Is(err, valkey.ErrDoCacheAborted) ||
		errors.Is(err, ErrCredentials) ||
		errors.As(err, &netErr) || errors.As(err, &certErr) || errors.As(err, &headerErr)
}

// transientReply tells the replies of a cache that answers again soon.
// valkey-go has typed checks for some; the others are told by their code,
// the reply's first word (BUSY is not BUSYKEY). Its IsMoved and IsAsk are
// not used: they panic on a reply without an address.
func transientReply(reply *valkey.ValkeyError) bool {
	if reply.IsNil() {
		return false
	}
	if reply.IsClusterDown() || reply.IsTryAgain() || reply.IsLoading() {
		return true
	}
	msg := reply.Error()
	switch code := codeOf(reply); code {
	case "MASTERDOWN", "READONLY", // a failover
		"MOVED", "ASK", // a slot moving faster than valkey-go's redirections follow
		"BUSY", // a script running long
		"OOM":  // the cache full until it evicts, or scales
		return true
	default:
		// A password rotated: the next connection reads it again.
		// valkey-go drops the code ERR: the connections are all taken.
		return authCode(code) || strings.HasPrefix(msg, "max number of clients reached") || throttled(msg)
	}
}

// codeOf is a reply's code, its first word (valkey-go drops ERR's).
func codeOf(reply *valkey.ValkeyError) string {
	code, _, _ := strings.Cut(reply.Error(), " ")
	return code
}

func authCode(code string) bool { return code == "WRONGPASS" || code == "NOAUTH" }

// Throttled reports whether err is the cache refusing a command above its
// ECPU limit: transient, and a sign to ask less.
func Throttled(err error) bool {
	var reply *valkey.ValkeyError
	return errors.As(err, &reply) && !reply.IsNil() && throttled(reply.Error())
}

// throttled tells ElastiCache Serverless's refusal of a request above the
// cache's ECPU limit. AWS counts them (ThrottledCmds) but does not publish
// the reply's text: a reply whose code, or first word after ERR, says it
// throttled — not one that merely mentions the word, as a NOPERM naming a
// key "throttler" would.
func throttled(msg string) bool {
	code, _, _ := strings.Cut(msg, " ")
	return strings.Contains(strings.ToLower(code), "throttl")
}

// Auth reports whether err is the cache refusing the login: the password
// is wrong, or was rotated since it was read.
func Auth(err error) bool {
	var reply *valkey.ValkeyError
	return errors.As(err, &reply) && authCode(codeOf(reply))
}

// Failover reports whether err is a reply that only a node in a failover
// gives: READONLY (a write reached a primary since demoted), MASTERDOWN (a
// replica lost its primary) or LOADING (a node restarted, loading its data).
// The deletes its old primary acknowledged last may be lost.
func Failover(err error) bool {
	var reply *valkey.ValkeyError
	if !errors.As(err, &reply) || reply.IsNil() {
		return false
	}
	code := codeOf(reply)
	return reply.IsLoading() || code == "READONLY" || code == "MASTERDOWN"
}

// Down reports whether err, met on a call to the cache, says the cache is
// down rather than answering: any error that is not a reply, and the
// replies of a cluster that cannot serve the key for now. It is not
// Transient: a service's breaker counts an unknown failure as the cache
// down, to fall back, while the worker parks it; and an answer such as
// OOM or BUSY is the cache up, though the worker retries it.
func Down(err error) bool {
	if err == nil {
		return false
	}
	var reply *valkey.ValkeyError
	if errors.As(err, &reply) {
		return reply.IsClusterDown() || reply.IsTryAgain() || reply.IsLoading()
	}
	return true
}
