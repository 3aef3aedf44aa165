package lambdaruntime

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// event is one invoke the fake runtime API hands out.
type event struct {
	id, arn, trace, deadline string // deadline: Lambda-Runtime-Deadline-Ms, default in 10 s
	payload                  string
}

// posted is one call the function made to the fake.
type posted struct {
	path, contentType, errorType, body string
}

// fakeAPI is the runtime API: GET next hands out its events in turn, and
// answers 410 once they are all out, which ends a loop (or waits for more,
// if it was made open); every POST is kept, and sent on posts if set.
type fakeAPI struct {
	srv    *httptest.Server
	events chan event
	status int // of POSTs, 202 unless set
	onPost func(posted)

	mu    sync.Mutex
	posts []posted
}

func newFakeAPI(t *testing.T, events ...event) *fakeAPI { return newFake(t, false, events...) }

func newFake(t *testing.T, open bool, events ...event) *fakeAPI {
	f := &fakeAPI{events: make(chan event, len(events)), status: http.StatusAccepted}
	for _, e := range events {
		f.events <- e
	}
	if !open {
		close(f.events)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) client() *client { return newClient(f.srv.Listener.Addr().String(), 1) }

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	const prefix = "/2018-06-01/runtime/"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == prefix+"invocation/next":
		var e event
		var ok bool
		select {
		case e, ok = <-f.events:
		case <-r.Context().Done(): // the client gave up
			return
		}
		if !ok {
			http.Error(w, `{"errorMessage":"no more events"}`, http.StatusGone)
			return
		}
		if e.deadline == "" {
			e.deadline = strconv.FormatInt(time.Now().Add(10*time.Second).UnixMilli(), 10)
		}
		h := w.Header()
		h.Set(headerRequestID, e.id)
		h.Set(headerDeadline, e.deadline)
		if e.arn != "" {
			h.Set(headerFunctionARN, e.arn)
		}
		if e.trace != "" {
			h.Set(headerTraceID, e.trace)
		}
		io.WriteString(w, e.payload)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, prefix):
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		p := posted{
			path:        strings.TrimPrefix(r.URL.Path, prefix),
			contentType: r.Header.Get("Content-Type"),
			errorType:   r.Header.Get(headerErrorType),
			body:        string(body),
		}
		f.posts = append(f.posts, p)
		f.mu.Unlock()
		if f.onPost != nil {
			f.onPost(p)
		}
		w.WriteHeader(f.status)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAPI) posted() []posted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]posted(nil), f.posts...)
}

// serveAll runs one loop over the fake's events, which must end with the
// fake's 410 once they are out.
func (f *fakeAPI) serveAll(t *testing.T, h Handler) []posted {
	t.Helper()
	err := f.client().loop(h, true, nil)
	if err == nil || !strings.Contains(err.Error(), "status 410") {
		t.Fatalf("loop: %v, want the fake's 410 after its last event", err)
	}
	return f.posted()
}
