package poller

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/invalidator-go/invalidator/worker/queues/queuestest"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func healthEnv(addr string) func(string) string {
	return func(k string) string { return map[string]string{"HEALTH_ADDR": addr}[k] }
}

// TestCheckHealth: the self-check a container health check runs finds a
// consuming poller healthy, and a draining one, a stopped one or none not.
func TestCheckHealth(t *testing.T) {
	port := freePort(t)
	_, stop := run(t, &queuestest.SQS{}, &cacheSwitch{}, Options{Receivers: 1, WaitTime: time.Second, HealthAddr: "127.0.0.1:" + port})
	// As HEALTH_ADDR is usually given: no host, asked on loopback.
	eventually(t, "a consuming poller is not healthy", func() bool { return CheckHealth(t.Context(), healthEnv(":"+port)) == nil })
	stop()
	if err := CheckHealth(t.Context(), healthEnv(":"+port)); err == nil {
		t.Fatal("a stopped poller is healthy")
	}

	port = freePort(t)
	p := &poller{opts: Options{HealthAddr: "127.0.0.1:" + port}}
	stopHealth, err := p.serveHealth()
	if err != nil {
		t.Fatal(err)
	}
	defer stopHealth()
	p.draining.Store(true)
	if err := CheckHealth(t.Context(), healthEnv("0.0.0.0:"+port)); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a draining poller: %v, want unhealthy, 503", err)
	}

	if err := CheckHealth(t.Context(), healthEnv("off")); err == nil || !strings.Contains(err.Error(), "HEALTH_ADDR") {
		t.Fatalf("HEALTH_ADDR=off: %v, want an error naming it", err)
	}
}
