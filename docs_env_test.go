package invalidator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	modulePath = "github.com/invalidator-go/invalidator"
	envPackage = modulePath + "/internal/env"
)

// connectionEnv are the variables that say where the cache is and how to log
// in: elasticache's own, which every service of the cache sets too.
var connectionEnv = []string{"CACHE_ENDPOINT", "CACHE_TLS", "CACHE_CA_FILE", "CACHE_IAM_AUTH", "CACHE_NAME", "CACHE_NODE_BASED",
	"CACHE_USERNAME", "CACHE_CONN_LIFETIME", "CACHE_PASSWORD", "CACHE_PASSWORD_SECRET_ARN"}

// envBudget is the most variables the functions and the poller read
// besides AWS's own and the connection's: what a deployment chooses, and
// only that (what it does not is a constant, or a field of the Options
// that tests set). The 17th is the fleet's most processes, which sets the
// share each asks while the fleet's budget cannot be read.
const envBudget = 17

// binaryEnv is every environment variable the functions and the poller
// read, by where it is read. It scans the Go source of the module's
// packages they link: every variable is read through internal/env, its
// name a string literal, and AWS's own (AWS_*) through os.Getenv. Any
// other read is an error of t, which the scan could not account for.
func binaryEnv(t *testing.T) map[string]string {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", "./functions/...").Output()
	if err != nil {
		t.Fatalf("go list the binaries' packages: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(fields) != 3 || fields[0] == envPackage || (fields[0] != modulePath && !strings.HasPrefix(fields[0], modulePath+"/")) {
			continue
		}
		for _, name := range strings.Fields(fields[2]) {
			path := filepath.Join(fields[1], name)
			if rel, err := filepath.Rel(wd, path); err == nil {
				path = rel
			}
			envReads(t, path, read)
		}
	}
	return read
}

// envReads adds the variables file reads to read.
func envReads(t *testing.T, path string, read map[string]string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	imported := map[string]string{} // local name: import path
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		local := p[strings.LastIndex(p, "/")+1:]
		if spec.Name != nil {
			local = spec.Name.Name
		}
		imported[local] = p
	}
	literal := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		at := fset.Position(call.Pos()).String()
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			pkg, ok := fun.X.(*ast.Ident)
			if !ok {
				return true
			}
			switch {
			case imported[pkg.Name] == envPackage:
				if len(call.Args) < 2 {
					return true
				}
				if name, ok := literal(call.Args[1]); ok {
					read[name] = at
				} else {
					t.Errorf("%s: env.%s of a variable not named by a string literal: the scan cannot see which", at, fun.Sel.Name)
				}
			case imported[pkg.Name] == "os" && (fun.Sel.Name == "Getenv" || fun.Sel.Name == "LookupEnv"):
				if name, ok := literal(call.Args[0]); !ok || !strings.HasPrefix(name, "AWS_") {
					t.Errorf("%s: os.%s(%s): read the binaries' variables through internal/env (AWS's own, AWS_*, aside)", at, fun.Sel.Name, types.ExprString(call.Args[0]))
				}
			}
		case *ast.Ident:
			if strings.EqualFold(fun.Name, "getenv") {
				t.Errorf("%s: getenv(%s): read the binaries' variables through internal/env", at, types.ExprString(call.Args[0]))
			}
		}
		return true
	})
}

var (
	envTable = regexp.MustCompile("(?m)^\\| variable \\| default \\|.*\\n\\|[-|]+\\|\\n((?:\\|.*\\n)+)")
	envName  = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
)

// documentedEnv is the variables of docs/operations.md's configuration
// table, named in the first cell of its rows, AWS's own aside.
func documentedEnv(t *testing.T) []string {
	data, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := envTable.FindSubmatch(data)
	if m == nil {
		t.Fatal("docs/operations.md has no table of variables (| variable | default | |)")
	}
	var names []string
	for row := range strings.Lines(string(m[1])) {
		first := strings.SplitN(row, "|", 3)[1]
		for _, v := range envName.FindAllStringSubmatch(first, -1) {
			if !strings.HasPrefix(v[1], "AWS_") {
				names = append(names, v[1])
			}
		}
	}
	return names
}

// TestDocsEnvironmentIsTheBinaries: every variable the functions and the
// poller read is a row of docs/operations.md's configuration table, every
// row is a variable they read, and they read no more than envBudget
// besides AWS's own and the connection's.
func TestDocsEnvironmentIsTheBinaries(t *testing.T) {
	read, documented := binaryEnv(t), documentedEnv(t)
	if len(read) == 0 || len(documented) == 0 {
		t.Fatalf("%d variables read, %d documented: the scan or the table found none", len(read), len(documented))
	}
	var knobs []string
	for name, at := range read {
		if !slices.Contains(documented, name) {
			t.Errorf("%s reads %s, which docs/operations.md's configuration table does not list", at, name)
		}
		if !slices.Contains(connectionEnv, name) {
			knobs = append(knobs, name)
		}
	}
	for _, name := range documented {
		if _, ok := read[name]; !ok {
			t.Errorf("docs/operations.md's configuration table lists %s, which neither the functions nor the poller read", name)
		}
	}
	slices.Sort(knobs)
	if len(knobs) > envBudget {
		t.Errorf("the binaries read %d variables besides AWS's and the connection's, more than %d: %v", len(knobs), envBudget, knobs)
	}
	t.Logf("%d variables besides AWS's and the connection's: %v", len(knobs), knobs)
}
