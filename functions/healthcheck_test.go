package functions

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
)

// TestPollerHealthCheckCommand runs the container health check that
// template.yaml gives the poller's task, poller -healthcheck: no shell, no
// curl, its exit status alone.
func TestPollerHealthCheckCommand(t *testing.T) {
	for status, want := range map[int]int{http.StatusOK: 0, http.StatusServiceUnavailable: 1} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(status)
		}))
		cmd := exec.Command(binary("poller"), "-healthcheck")
		cmd.Env = append(os.Environ(), "HEALTH_ADDR="+srv.Listener.Addr().String())
		out, _ := cmd.CombinedOutput()
		srv.Close()
		if got := cmd.ProcessState.ExitCode(); got != want {
			t.Errorf("/healthz answering %d: exit status %d (%s), want %d", status, got, out, want)
		}
	}
}
