// Package serverinfo tells which server a cache runs — valkey or redis —
// and its version, for the lines make e2e, make soak and make bench print:
// a measurement means little without the server it was made on.
package serverinfo

import (
	"context"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// Of reads INFO server from one node of client's cache: "valkey 8.0.1", or
// "redis 7.0.15" for a server that does not name itself (Valkey also
// answers a redis_version, its compatibility level, which says nothing).
func Of(ctx context.Context, client valkey.Client) (string, error) {
	info, err := client.Do(ctx, client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return "", err
	}
	return parse(info), nil
}

func parse(info string) string {
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	name := fields["server_name"]
	if name == "" {
		name = "redis"
	}
	version := fields[name+"_version"]
	if version == "" {
		version = fields["redis_version"]
	}
	return name + " " + version
}
