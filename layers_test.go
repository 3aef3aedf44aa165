package invalidator

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layers are the module's, lowest first: a package may import only its own
// layer's and those below (tests aside), and a package's layer is its top
// folder's. The helpers under everything; the decoders; the rules and the
// deleter; the packages services import; the worker and its front ends;
// the mains and the CLI; the local stack's tools and test support.
var layers = [][]string{
	{"internal"},
	{"events"},
	{"invalidate", "elasticache"},
	{"writethrough", "recipes"},
	{"worker"},
	{"functions", "cmd"},
	{"localstack", ""}, // "": the root package, the template's tests
}

const module = "github.com/invalidator-go/invalidator"

// layerOf is the layer of path's top folder; a folder no layer names is
// put at the top, where it can import anything and nothing imports it.
func layerOf(path string) int {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	top, _, _ := strings.Cut(rel, "/")
	for i, layer := range layers {
		if slices.Contains(layer, top) {
			return i
		}
	}
	return len(layers) - 1
}

// TestImportsRunDownTheLayers: no package imports one of a layer above its
// own, so internal/ imports nothing public and the worker no dev tool.
func TestImportsRunDownTheLayers(t *testing.T) {
	for pkg, imports := range imports(t) {
		for _, imp := range imports {
			if strings.HasPrefix(imp, module) && layerOf(imp) > layerOf(pkg) {
				t.Errorf("%s imports %s, a layer above it", strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
}

// imports are the imports of each package of the module, tests aside.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		all[f[0]] = f[1:]
	}
	return all
}

// TestOnlyEventsReadsARecord: events is the one reader of what arrives —
// a record's changes and its delivery (ID, message, receipt) in one pass —
// so no other package imports the JSON scanner (tests aside): parking,
// replay and the poller take the delivery. The others that use
// encoding/json read or write JSON of their own, none of it a record, each
// named here with what it is; the local stack's tools are Lambda's and
// SQS's stand-ins, which do.
func TestOnlyEventsReadsARecord(t *testing.T) {
	jsonOfTheirOwn := map[string]string{
		"worker":                           "the password's secret",
		"worker/failurequeue":              "parked records of versions before message attributes (their own envelope)",
		"worker/lambda":                    "Lambda's answer to an invoke",
		"invalidate/announce":              "its announcements",
		"writethrough":                     "services' values (JSONCodec)",
		"cmd/invalidator":                  "its --json output",
		"cmd/invalidator/internal/inspect": "its report; a cached value's version",
		"cmd/invalidator/internal/replay":  "the envelope of Lambda's on-failure destinations, around a payload events splits",
	}
	for pkg, imports := range imports(t) {
		rel := strings.TrimPrefix(pkg, module+"/")
		if slices.Contains(imports, module+"/internal/jsonscan") && rel != "events" {
			t.Errorf("%s imports internal/jsonscan: only events reads a record", rel)
		}
		if _, own := jsonOfTheirOwn[rel]; slices.Contains(imports, "encoding/json") && !own && rel != "events" && !strings.HasPrefix(rel, "localstack/") {
			t.Errorf("%s imports encoding/json: a record is events' to read; JSON of its own is named in this test", rel)
		}
	}
}

// TestOneQueuesPackageCallsSQS: every SQS call behind a record's fate —
// receive, delete, hand back, send to the delay, window and failure
// queues — is worker/queues', for both front ends; the rest of what the
// functions and the poller link holds receipt handles and bodies, not the
// SDK's types. The poller's main builds its client.
func TestOneQueuesPackageCallsSQS(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{.Name}}{{range .Imports}} {{.}}{{end}}`, "./functions/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		rel, ours := strings.CutPrefix(f[0], module+"/")
		if !ours || f[1] == "main" || rel == "worker/queues" {
			continue
		}
		for _, imp := range f[2:] {
			if strings.HasPrefix(imp, "github.com/aws/aws-sdk-go-v2/service/sqs") {
				t.Errorf("%s imports %s: SQS is worker/queues' to call", rel, imp)
			}
		}
	}
}
