package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// apiCounter is a reverse proxy in front of moto that counts what one
// client — a mapping, a function, a poller — asks of it, by API action
// (SQS bills each request, a receive that finds nothing included), with
// the messages that batch requests carry and receives return, and the
// time moto took.
type apiCounter struct {
	URL string
	srv *http.Server
	mu  sync.Mutex
	n   apiCounts
}

// apiCounts are an apiCounter's figures so far.
type apiCounts struct {
	Calls    map[string]int           // requests by action: ReceiveMessage, DeleteMessageBatch, GetRecords...
	Messages map[string]int           // entries of batch requests, messages received
	Received map[string]int           // messages received, by queue URL
	Sent     map[string]int           // SendMessage calls, by queue URL
	Empty    int                      // receives that returned no message
	Took     map[string]time.Duration // moto's time, by action
}

func newAPICounter(target string) (*apiCounter, error) {
	to, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &apiCounter{URL: "http://" + ln.Addr().String()}
	c.reset()
	proxy := httputil.NewSingleHostReverseProxy(to)
	// A long poll cut short when its mapping stops is no error of moto's;
	// any other is said, as the request its client may then send again
	// is counted again.
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil {
			log.Printf("cost: proxy to moto: %v", err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// X-Amz-Target is "AmazonSQS.ReceiveMessage", "DynamoDBStreams_20120810.GetRecords"...
		_, action, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{ResponseWriter: w, keep: action == "ReceiveMessage"}
		start := time.Now()
		proxy.ServeHTTP(rec, r)
		c.count(action, body, rec.body.Bytes(), time.Since(start))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

func (c *apiCounter) count(action string, req, resp []byte, took time.Duration) {
	var in struct {
		QueueUrl string
		Entries  []json.RawMessage
	}
	var out struct{ Messages []json.RawMessage }
	_ = json.Unmarshal(req, &in)
	_ = json.Unmarshal(resp, &out)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Calls[action]++
	c.n.Took[action] += took
	c.n.Messages[action] += len(in.Entries) + len(out.Messages)
	c.n.Received[in.QueueUrl] += len(out.Messages)
	if action == "SendMessage" {
		c.n.Sent[in.QueueUrl]++
	}
	if action == "ReceiveMessage" && len(out.Messages) == 0 {
		c.n.Empty++
	}
}

func (c *apiCounter) counts() apiCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return apiCounts{Calls: maps.Clone(c.n.Calls), Messages: maps.Clone(c.n.Messages), Received: maps.Clone(c.n.Received), Sent: maps.Clone(c.n.Sent), Empty: c.n.Empty, Took: maps.Clone(c.n.Took)}
}

// reset forgets what was counted so far.
func (c *apiCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = apiCounts{Calls: map[string]int{}, Messages: map[string]int{}, Received: map[string]int{}, Sent: map[string]int{}, Took: map[string]time.Duration{}}
}

func (c *apiCounter) Close() { _ = c.srv.Close() }

// add sums counts of several clients.
func (a apiCounts) add(b apiCounts) apiCounts {
	sum := apiCounts{Calls: map[string]int{}, Messages: map[string]int{}, Received: map[string]int{}, Sent: map[string]int{}, Empty: a.Empty + b.Empty, Took: map[string]time.Duration{}}
	for _, n := range []apiCounts{a, b} {
		for k, v := range n.Sent {
			sum.Sent[k] += v
		}
		for k, v := range n.Calls {
			sum.Calls[k] += v
		}
		for k, v := range n.Messages {
			sum.Messages[k] += v
		}
		for k, v := range n.Received {
			sum.Received[k] += v
		}
		for k, v := range n.Took {
			sum.Took[k] += v
		}
	}
	return sum
}

// recorder passes a response on, keeping a copy of its body when asked.
type recorder struct {
	http.ResponseWriter
	keep bool
	body bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.keep {
		r.body.Write(p)
	}
	return r.ResponseWriter.Write(p)
}
