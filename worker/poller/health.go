package poller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/invalidator-go/invalidator/internal/env"
)

// healthAddr reads HEALTH_ADDR: ":8080" when unset, "" when "off".
func healthAddr(getenv func(string) string) string {
	switch v := env.String(getenv, "HEALTH_ADDR"); v {
	case "":
		return ":8080"
	case "off":
		return ""
	default:
		return v
	}
}

// serveHealth answers GET /healthz: 200 while consuming, 503 while draining.
func (p *poller) serveHealth() (stop func(), err error) {
	if p.opts.HealthAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", p.opts.HealthAddr)
	if err != nil {
		return nil, fmt.Errorf("health endpoint on %s: %w", p.opts.HealthAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if p.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// CheckHealth asks the running poller's GET /healthz, at HEALTH_ADDR read
// through getenv, and returns nil when it answers 200. It is the container
// health check of images that have no shell or curl (poller -healthcheck).
// An address without a host, or with an unspecified one, is asked on
// loopback: the check runs in the poller's own network namespace.
func CheckHealth(ctx context.Context, getenv func(string) string) error {
	addr := healthAddr(getenv)
	if addr == "" {
		return errors.New("HEALTH_ADDR=off: there is no health endpoint to ask")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("HEALTH_ADDR=%q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz answered %s", resp.Status)
	}
	return nil
}
