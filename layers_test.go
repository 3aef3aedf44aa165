package invalidator

import (
	"os/exec"
	"strings"
	"testing"
)

// layers are the module's, lowest first: a package may import only its own
// layer's and those below (tests aside). The helpers under everything; the
// decoders, the rules and the deleter, the packages services import; the
// front ends; the mains and the CLI; the local stack's tools and test
// support, above all of them.
var layers = [][]string{
	{"internal/"},
	{"events"},
	{"invalidate", "elasticache"},
	{"writethrough", "recipes/"},
	{"internal/frontend/"},
	{"functions", "cmd/"},
	{"localstack", ""}, // "": the root package, the template's tests
}

const module = "github.com/invalidator-go/invalidator"

// layerOf is the layer of the longest prefix that path has: the front
// ends sit under internal/, above the helpers.
func layerOf(path string) int {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	found, longest := len(layers)-1, -1
	for i, layer := range layers {
		for _, prefix := range layer {
			p := strings.TrimSuffix(prefix, "/")
			if (rel == p || (prefix != "" && strings.HasPrefix(rel, p+"/"))) && len(p) > longest {
				found, longest = i, len(p)
			}
		}
	}
	return found
}

// TestImportsRunDownTheLayers: no package imports one of a layer above its
// own, so internal/ imports nothing public and no front end a dev tool.
func TestImportsRunDownTheLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) && layerOf(imp) > layerOf(f[0]) {
				t.Errorf("%s imports %s, a layer above it", strings.TrimPrefix(f[0], module+"/"), strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
}
