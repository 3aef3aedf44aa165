package invalidator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/invalidate"
)

// exportChecked are the packages whose every exported name something
// outside them uses (tests aside): the decoders, the deleter, the worker
// and its front ends. The libraries services import keep their API;
// packages ending in "test" are the tests' support.
var exportChecked = []string{"events", "invalidate", "invalidate/announce",
	"worker", "worker/lambda", "worker/poller", "worker/failurequeue", "worker/queues", "worker/streams"}

// heldByTests are exported for a test of another package to hold them to
// what they must match, by package and name.
var heldByTests = map[string]string{
	"worker.DefaultDelayMaxBytes":           "template_test: the delay queue's MaximumMessageSize",
	"worker/failurequeue.MaxBytes":          "template_test: the failure queue's MaximumMessageSize",
	"worker/failurequeue.MaxAttributeBytes": "template_test: the room the queues parked from leave",
	"worker/failurequeue.KindV1":            "replay's test: a parked record of earlier versions",
	"worker/lambda.RecordsFailed":           "the hostile suite: an SNS invoke's records to retry, by errors.As",
	"worker/queues.Own":                     "the CLI's test: every queue of the worker's refused",
}

// TestEveryExportIsUsed: an exported name of exportChecked that nothing
// outside its package uses — the mains, the CLI, the front ends, the tools,
// bench — should not be exported.
func TestEveryExportIsUsed(t *testing.T) {
	fset := token.NewFileSet()
	files := map[string][]*ast.File{} // by directory, relative to the module
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "." || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(filepath.Dir(p))] = append(files[filepath.ToSlash(filepath.Dir(p))], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range exportChecked {
		// A type named in the package's own exported signatures and fields
		// is used where they are; a constant, where another of its block is
		// (an enumeration is whole).
		exported := map[string]bool{}
		inSignature := map[string]bool{}
		var blocks [][]string
		names := func(n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					inSignature[id.Name] = true
				}
				return true
			})
		}
		for _, f := range files[pkg] {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() {
						names(d.Type)
					}
					if d.Recv == nil && d.Name.IsExported() {
						exported[d.Name.Name] = true
					}
				case *ast.GenDecl:
					var block []string
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								exported[s.Name.Name] = true
								names(s.Type)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									exported[n.Name] = true
									block = append(block, n.Name)
								}
							}
						}
					}
					if d.Tok == token.CONST {
						blocks = append(blocks, block)
					}
				}
			}
		}
		used := map[string]bool{}
		for dir, fs := range files {
			if dir == pkg {
				continue
			}
			for _, f := range fs {
				name := ""
				for _, imp := range f.Imports {
					if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/"+pkg {
						name = path.Base(p)
						if imp.Name != nil {
							name = imp.Name.Name
						}
					}
				}
				if name == "" {
					continue
				}
				ast.Inspect(f, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
							used[sel.Sel.Name] = true
						}
					}
					return true
				})
			}
		}
		for _, block := range blocks {
			if slices.ContainsFunc(block, func(n string) bool { return used[n] }) {
				for _, n := range block {
					used[n] = true
				}
			}
		}
		var unused []string
		for name := range exported {
			if _, held := heldByTests[pkg+"."+name]; !used[name] && !inSignature[name] && !held {
				unused = append(unused, name)
			}
		}
		slices.Sort(unused)
		if len(unused) > 0 {
			t.Errorf("%s exports %d names nothing outside it uses: %s", pkg, len(unused), strings.Join(unused, ", "))
		}
	}
}

// TestOnlyTheConnectionIsACacheOutsideInvalidate: a cache outside
// invalidate/ — a wrapper, a test's own fake — is a second path to the
// deletes; the worker's reconnecting connection is the one the product
// needs, and the tests' fakes live in invalidate/cachetest.
func TestOnlyTheConnectionIsACacheOutsideInvalidate(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "." || d.Name() == "testdata" || p == "invalidate") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.Name == "Unlink" {
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					found = append(found, filepath.ToSlash(filepath.Dir(p))+"."+id.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []string{"worker.connection"}) {
		t.Errorf("types with an Unlink outside invalidate/: %v, want the worker's connection alone", found)
	}
}

// TestTheReportSaysNoFate: invalidate's report says what became of a
// batch's keys and tags; what becomes of a record — done, retried,
// parked — is the worker's to say (worker.Outcome), so no field or method
// of the report says parked or retry.
func TestTheReportSaysNoFate(t *testing.T) {
	want := map[reflect.Type][]string{
		reflect.TypeFor[invalidate.Report](): {"Results", "Metrics"},
		reflect.TypeFor[invalidate.Result](): {"Record", "Keys", "Tags", "Err", "Transient", "SecondDelete", "Failover"},
	}
	for typ, fields := range want {
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%v has fields %v, want %v", typ, got, fields)
		}
		ptr := reflect.PointerTo(typ)
		for i := range ptr.NumMethod() {
			if name := ptr.Method(i).Name; strings.Contains(name, "Retry") || strings.Contains(name, "Park") {
				t.Errorf("%v has method %s: a record's fate is the worker's", typ, name)
			}
		}
	}
}
