package serverinfo

import "testing"

func TestParse(t *testing.T) {
	for info, want := range map[string]string{
		"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n": "valkey 8.0.1",
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\n":                        "redis 7.0.15",
	} {
		if got := parse(info); got != want {
			t.Errorf("parse(%q) = %q, want %q", info, got, want)
		}
	}
}
