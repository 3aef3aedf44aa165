package invalidator

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// docs are the pages a newcomer reads.
func docs(t *testing.T) []string {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(pages, "README.md", "writethrough/README.md", "recipes/README.md", "bench/README.md")
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#+ (.+)$`)
	target  = regexp.MustCompile(`(?m)^([a-z0-9][a-z0-9-]*):`)
	makeUse = regexp.MustCompile(`(?:^|\s)make ([a-z0-9][a-z0-9-]*)`)
	cliUse  = regexp.MustCompile(`(?:^|[\s/])(?:invalidator|go run \./cmd/invalidator) ([a-z]+)\b`)
	goRun   = regexp.MustCompile(`go run (\./[a-z0-9/._-]+)`)
	fenced  = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	inline  = regexp.MustCompile("`([^`\n]+)`")
	script  = regexp.MustCompile(`(?:bash |\. )(localstack/[a-z0-9/._-]+\.sh)`)
)

// anchor is the fragment GitHub gives a heading.
func anchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinksResolve: every relative link of the pages names a file, and
// a heading of it when it names one.
func TestDocsLinksResolve(t *testing.T) {
	for _, page := range docs(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			to := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(to) {
				continue
			}
			file, frag, _ := strings.Cut(to, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				if _, serr := os.Stat(path); serr != nil {
					t.Errorf("%s links to %s: %v", page, to, serr)
				}
				continue
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			var anchors []string
			for _, h := range heading.FindAllStringSubmatch(string(data), -1) {
				anchors = append(anchors, anchor(h[1]))
			}
			if !slices.Contains(anchors, frag) {
				t.Errorf("%s links to %s: %s has no heading #%s", page, to, path, frag)
			}
		}
	}
}

// code is what a page shows as code: its fenced blocks and inline spans.
func code(page []byte) string {
	var b strings.Builder
	for _, m := range fenced.FindAllSubmatch(page, -1) {
		b.Write(m[1])
		b.WriteByte('\n')
	}
	for _, m := range inline.FindAllSubmatch(fenced.ReplaceAll(page, nil), -1) {
		b.Write(m[1])
		b.WriteByte('\n')
	}
	return b.String()
}

// TestDocsFencesClose: a code block opens with ``` and its language and
// closes with ``` alone, or the page renders as code from there on (the
// README's quick try once closed with text after its fence).
func TestDocsFencesClose(t *testing.T) {
	for _, page := range docs(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		open := false
		for n, line := range strings.Split(string(text), "\n") {
			fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```")
			switch {
			case !ok:
			case open && fence != "":
				t.Errorf("%s:%d: %q closes a code block with text after its fence", page, n+1, line)
			case !open && strings.ContainsAny(fence, " `"):
				t.Errorf("%s:%d: %q opens a code block with more than a language", page, n+1, line)
			default:
				open = !open
			}
		}
		if open {
			t.Errorf("%s: a code block is not closed", page)
		}
	}
}

// TestDocsCommandsExist: the make targets, the CLI's verbs, the packages
// run with go run and the stack's scripts the pages show all exist; the
// verbs answer --help. (AWS's own commands, sam and aws, are not run.)
func TestDocsCommandsExist(t *testing.T) {
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range target.FindAllStringSubmatch(string(makefile), -1) {
		targets = append(targets, m[1])
	}
	verbs := map[string]bool{}
	for _, page := range docs(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := code(data)
		for _, m := range makeUse.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(targets, m[1]) && !strings.HasPrefix(m[1], "build-") {
				t.Errorf("%s shows make %s: the Makefile has no such target", page, m[1])
			}
		}
		for _, m := range cliUse.FindAllStringSubmatch(text, -1) {
			verbs[m[1]] = true
		}
		for _, m := range goRun.FindAllStringSubmatch(text, -1) {
			if fi, err := os.Stat(strings.TrimSuffix(m[1], "/...")); err != nil || !fi.IsDir() {
				t.Errorf("%s shows go run %s: no such package", page, m[1])
			}
		}
		for _, m := range script.FindAllStringSubmatch(text, -1) {
			if _, err := os.Stat(m[1]); err != nil {
				t.Errorf("%s shows %s: %v", page, m[1], err)
			}
		}
	}
	if testing.Short() {
		return
	}
	cli := filepath.Join(t.TempDir(), "invalidator")
	if out, err := exec.Command("go", append(append([]string{"build"}, testenv.BuildFlags()...), "-o", cli, "./cmd/invalidator")...).CombinedOutput(); err != nil {
		t.Fatalf("build the CLI: %v\n%s", err, out)
	}
	for verb := range verbs {
		if out, err := exec.Command(cli, verb, "--help").CombinedOutput(); err != nil {
			t.Errorf("the pages show invalidator %s, whose --help fails: %v\n%s", verb, err, out)
		}
	}
}

// TestPackageCommentsNameTheirPackage: every package's comment begins
// "Package <its name>", every command's "Command <its directory>", so
// that a renamed package does not keep an old name in its doc.go.
func TestPackageCommentsNameTheirPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Name}}\t{{.ImportPath}}\t{{.Doc}}", "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, _ := strings.Cut(line, "\t")
		path, doc, _ := strings.Cut(rest, "\t")
		want := "Package " + name + " "
		if name == "main" {
			want = "Command " + filepath.Base(path) + " "
		}
		if !strings.HasPrefix(doc+" ", want) {
			t.Errorf("%s: its comment begins %q, want %q", path, doc, want)
		}
	}
}

// The budget a newcomer reads in minutes: bench/README.md, which make
// bench-record fills, and the reference pages with it (131,000 since the
// fleet's ECPU budget, after cuts of as much elsewhere; 133,100 since the
// commit log's page, 2 KB; 133,700 since its local stand-in, make e2e's
// path, Kafka and the front ends' table's new rows, 2.1 KB, after cuts of
// 1.6 KB); 133,900 since Valkey 9 in the stack and the lock's own
// commands, 1 KB, after cuts of 0.8 KB).
const (
	benchReadmeMaxBytes = 20_000
	docsMaxBytes        = 133_900
)

// docsSize is the bytes of bench/README.md, and of docs/*.md with bench/*.md
// together.
func docsSize(t *testing.T) (bench, total int64) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("bench/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append(pages, more...) {
		fi, err := os.Stat(page)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		if page == filepath.Join("bench", "README.md") {
			bench = fi.Size()
		}
	}
	if bench == 0 {
		t.Fatal("no bench/README.md")
	}
	return bench, total
}

// TestDocsSize: bench/README.md stays the latest figures and the analyses
// that still decide, at most benchReadmeMaxBytes, and docs/*.md with bench/*.md at
// most docsMaxBytes together. History goes to git, not to the pages.
func TestDocsSize(t *testing.T) {
	bench, total := docsSize(t)
	if bench > benchReadmeMaxBytes {
		t.Errorf("bench/README.md is %d bytes, over %d: keep the latest figures and what still decides, cut the rest", bench, benchReadmeMaxBytes)
	}
	if total > docsMaxBytes {
		t.Errorf("docs/*.md and bench/*.md are %d bytes together, over %d", total, docsMaxBytes)
	}
	t.Logf("bench/README.md %d bytes, docs/*.md and bench/*.md %d", bench, total)
}
