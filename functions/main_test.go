package functions

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// binDir holds the binaries, built once for all tests as make build does,
// and the CLI.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "invalidator-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	cmd := exec.Command("go", append(append([]string{"build"}, testenv.BuildFlags()...), "-tags", "lambda.norpc", "-o", dir+string(filepath.Separator), "./...", "../cmd/invalidator")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the functions: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func binary(name string) string { return filepath.Join(binDir, name) }
