package invalidate_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/internal/cacheerr"
	"github.com/invalidator-go/invalidator/invalidate"
	"github.com/invalidator-go/invalidator/invalidate/cachetest"
)

// TestWhatMayPass is the closed list of the failures that may pass, each
// met once by a key and by a tag: those are retried, and the record done
// once they pass; every other failure — what the cache answers, a bug —
// fails the record for good on the first try, with its reason, and the
// rest of the batch proceeds.
func TestWhatMayPass(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		err      error
		mayPass  bool
		whyNamed string // the class, when the error's text does not say it
	}{
		// The cache out of reach, or the attempt's time up.
		{cachetest.ErrRefused, true, "a refused connection"},
		{timeout, true, "a network timeout"},
		{io.EOF, true, "a connection closed"},
		{io.ErrUnexpectedEOF, true, "a reply cut short"},
		{valkey.ErrClosing, true, "the client closing"},
		{fmt.Errorf("the cache connection is closed: %w", valkey.ErrClosing), true, "the worker's connection closed"},
		{valkey.ErrNoSlot, true, "a slot no node serves yet"},
		{context.DeadlineExceeded, true, "the attempt's deadline"},
		{context.Canceled, true, "the batch given up (shutdown)"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, true, "a TLS handshake refused"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true, "not TLS on the other side"},
		{fmt.Errorf("%w: the secret: AccessDeniedException", cacheerr.ErrCredentials), true, "no credentials for a new connection"},
		{fmt.Errorf("%w: IAM token: failed to refresh cached credentials, StatusCode: 500", cacheerr.ErrCredentials), true, "no IAM token: the credentials' source failed"},
		// The cache in motion, full or busy: it answers again soon.
		{cachetest.Reply("CLUSTERDOWN The cluster is down"), true, ""},
		{cachetest.Reply("TRYAGAIN Multiple keys request during rehashing of slot"), true, ""},
		{cachetest.Reply("LOADING Valkey is loading the dataset in memory"), true, ""},
		{cachetest.Reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true, ""},
		{cachetest.Reply("READONLY You can't write against a read only replica."), true, "a failover"},
		{cachetest.Reply("MOVED 3999 127.0.0.1:7002"), true, "redirections past valkey-go's"},
		{cachetest.Reply("ASK 3999 127.0.0.1:7002"), true, ""},
		{cachetest.Reply("MOVED"), true, "a redirection without its address does not panic"},
		{cachetest.Reply("BUSY Valkey is busy running a script. You can only call SCRIPT KILL or FUNCTION KILL."), true, ""},
		{cachetest.Reply("OOM command not allowed when used memory > 'maxmemory'."), true, "the cache evicting"},
		{cachetest.Reply("ERR max number of clients reached"), true, ""},
		{cachetest.Reply("WRONGPASS invalid username-password pair or user is disabled."), true, "a password rotated: read again"},
		{cachetest.Reply("NOAUTH Authentication required."), true, ""},
		{cachetest.Reply("ERR Throttled"), true, "ElastiCache Serverless throttling"},
		{cachetest.Reply("THROTTLED request rate above the cache's ECPU limit"), true, ""},
		// What the cache answers that will come back: for good.
		{cachetest.ErrNoPerm, false, ""},
		{cachetest.Reply("WRONGTYPE Operation against a key holding the wrong kind of value script: 1a2b, on @user_script:3."), false, "a tag key holding a string"},
		{cachetest.Reply("ERR value is not an integer or out of range script: 1a2b, on @user_script:4."), false, "a tag clock that is no integer"},
		{cachetest.Reply("ERR user_script:2: Script attempted to access nonexistent global variable 'x' script: 1a2b"), false, "a script error"},
		{cachetest.Reply("CROSSSLOT Keys in request don't hash to the same slot"), false, ""},
		{cachetest.Reply("BUSYKEY Target key name already exists."), false, "BUSYKEY, not BUSY"},
		{cachetest.Reply("BUSYGROUP Consumer Group name already exists"), false, "BUSYGROUP, not BUSY"},
		{cachetest.Reply("ERR unknown command 'unlink'"), false, ""},
		{cachetest.Reply("NOPERM User throttler has no permissions to access the 'cache:x' key"), false, "a reply that only mentions the word"},
		{valkey.Nil, false, "a nil reply where one was wanted"},
		{errors.New("a reply of a shape nobody expected"), false, "any other error"},
		{invalidate.PanicError("sending", "boom"), false, "a bug"},
	} {
		name := tc.whyNamed
		if name == "" {
			name = tc.err.Error()
		}
		t.Run(name, func(t *testing.T) {
			fail := func(key string, attempt int) error {
				if attempt == 1 && (key == "cache:user:1" || key == "cache:tag:t") {
					return tc.err
				}
				return nil
			}
			cache := &cachetest.Cache{Fail: fail}
			entries(cache, "cache:tag:t", 3)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			rep := invalidate.New(cache, fast()).Invalidate(ctx, invalidate.Decoded([]invalidate.Record{
				user("1"), tagged("2", "t"), user("3")}))
			for i, res := range rep.Results[:2] {
				switch {
				case tc.mayPass && res.Err != nil:
					t.Errorf("record %d: %v, want it retried and done", i+1, res.Err)
				case !tc.mayPass && (res.Err == nil || res.Transient || !errors.Is(res.Err, tc.err)):
					t.Errorf("record %d: %v (transient %v), want it failed for good, with the error", i+1, res.Err, res.Transient)
				}
			}
			if res := rep.Results[2]; res.Err != nil {
				t.Errorf("the record after them: %v", res.Err)
			}
			if n := cache.Attempts("cache:user:1") + cache.Attempts("cache:tag:t"); !tc.mayPass && n != 2 {
				t.Errorf("the key and the tag were tried %d times in all, want once each", n)
			}
		})
	}
}
