package invalidator

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// serviceSum is every module a service importing writethrough and
// elasticache may find in its go.sum: what they link, and valkey-go's own
// test dependencies (go mod tidy records those of the packages it imports).
// None of aws-lambda-go, the AWS SDK's service clients, its config or
// credential chain, or the emulator: a test file of ours that imports one
// of them puts it in every service's go.sum.
var serviceSum = []string{
	"github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go", "github.com/valkey-io/valkey-go",
	"golang.org/x/sync", "golang.org/x/sys",
	"github.com/google/go-cmp", "github.com/onsi/gomega", "go.yaml.in/yaml/v3", "golang.org/x/net", "golang.org/x/text",
}

// nearSum is what a service that also imports writethrough/near may find
// in its go.sum beside serviceSum: the tier's store, otter, which links
// nothing else, and the test dependency its go.mod names.
var nearSum = []string{"github.com/maypok86/otter/v2", "github.com/stretchr/testify"}

// TestAServiceStaysLean builds a module outside this one that imports
// writethrough and elasticache, as a service does, and checks what its
// go.sum names and what its binary links: six modules besides its own. A
// service that opts in to the local tier (writethrough/near) links one
// more, otter; the others pay nothing for it.
func TestAServiceStaysLean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy and go build in modules of their own")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, service := range []struct {
		name    string
		imports string
		uses    string
		sum     []string
		links   int
	}{
		{"plain", "", "_ = writethrough.New[string](client, writethrough.Options[string]{})", serviceSum, 6},
		{"near", `"github.com/invalidator-go/invalidator/writethrough/near"`,
			"_ = writethrough.New[string](client, writethrough.Options[string]{Local: near.New[string](near.Open(client, near.ChannelOptions{}), near.Options{})})",
			append(slices.Clone(serviceSum), nearSum...), 7},
	} {
		t.Run(service.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{
				"go.mod": "module example.com/service\n\ngo 1.25.0\n\nrequire github.com/invalidator-go/invalidator v0.0.0\n\n" +
					"replace github.com/invalidator-go/invalidator => " + root + "\n",
				"main.go": `package main

import (
	"github.com/invalidator-go/invalidator/elasticache"
	"github.com/invalidator-go/invalidator/writethrough"
	` + service.imports + `
)

func main() {
	client, err := elasticache.New(elasticache.Config{Endpoint: "localhost:6379"})
	if err == nil {
		` + service.uses + `
	}
}
`,
			}
			// Our go.sum holds every checksum the service's needs: go mod
			// tidy then asks no checksum database (make test runs offline).
			sum, err := os.ReadFile("go.sum")
			if err != nil {
				t.Fatal(err)
			}
			files["go.sum"] = string(sum)
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("go", args...)
				cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			run("mod", "tidy")
			sum, err = os.ReadFile(filepath.Join(dir, "go.sum"))
			if err != nil {
				t.Fatal(err)
			}
			var named []string
			for _, line := range strings.Split(strings.TrimSpace(string(sum)), "\n") {
				if mod := strings.Fields(line)[0]; !slices.Contains(service.sum, mod) && !slices.Contains(named, mod) {
					named = append(named, mod)
				}
			}
			if len(named) > 0 {
				t.Errorf("the service's go.sum names %v: a package it imports, or a test of one, imports them", named)
			}
			run(append(append([]string{"build"}, testenv.BuildFlags()...), "-o", "service", ".")...)
			var linked []string
			for _, line := range strings.Split(run("version", "-m", "service"), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "dep" {
					linked = append(linked, f[1])
				}
			}
			if len(linked) > service.links {
				t.Errorf("the service links %d modules besides its own, want at most %d: %v", len(linked), service.links, linked)
			}
		})
	}
}
