package worker

import (
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	base := map[string]string{"CACHE_ENDPOINT": "cache.example:6379"}
	for _, tc := range []struct {
		name, key, value, wantErr string
	}{
		{"defaults", "", "", ""},
		{"log level", "LOG_LEVEL", "warn", ""},
		{"bad log level", "LOG_LEVEL", "loud", "LOG_LEVEL"},
		{"namespace", "METRICS_NAMESPACE", "Team/Cache #1: invalidator_v2.0", ""},
		{"namespace of AWS", "METRICS_NAMESPACE", "AWS/Lambda", "METRICS_NAMESPACE"},
		{"namespace with a quote", "METRICS_NAMESPACE", `Cache"s`, "METRICS_NAMESPACE"},
		{"blank namespace", "METRICS_NAMESPACE", "   ", "METRICS_NAMESPACE"},
		{"long namespace", "METRICS_NAMESPACE", strings.Repeat("n", 256), "METRICS_NAMESPACE"},
		{"no endpoint", "CACHE_ENDPOINT", "", "CACHE_ENDPOINT"},
		{"bad rules", "INVALIDATION_RULES", "entities: {user: [\"\"]}", "INVALIDATION_RULES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{tc.key: tc.value}
			for k, v := range base {
				if _, set := env[k]; !set {
					env[k] = v
				}
			}
			_, err := LoadConfig(func(k string) string { return env[k] })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}
