package poller

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := OptionsFromEnv(env(map[string]string{"QUEUE_URL": "https://sqs/q"}))
	if err != nil || o.Receivers != 2 || o.VisibilityTimeout != 30*time.Second || o.BatchTimeout != time.Minute || o.HealthAddr != ":8080" {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	o, err = OptionsFromEnv(env(map[string]string{"QUEUE_URL": "q", "HEALTH_ADDR": "off", "POLLER_RECEIVERS": "5", "POLLER_VISIBILITY_TIMEOUT": "2m"}))
	if err != nil || o.HealthAddr != "" || o.Receivers != 5 || o.VisibilityTimeout != 2*time.Minute {
		t.Fatalf("options = %+v, %v", o, err)
	}
	for name, vars := range map[string]map[string]string{
		"QUEUE_URL":                 {},
		"POLLER_RECEIVERS":          {"QUEUE_URL": "q", "POLLER_RECEIVERS": "0"},
		"POLLER_VISIBILITY_TIMEOUT": {"QUEUE_URL": "q", "POLLER_VISIBILITY_TIMEOUT": "soon"},
		"POLLER_BATCH_TIMEOUT":      {"QUEUE_URL": "q", "POLLER_BATCH_TIMEOUT": "10ms"},
	} {
		if _, err := OptionsFromEnv(env(vars)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("bad %s: err = %v, want it named", name, err)
		}
	}
}
