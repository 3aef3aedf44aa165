// Package golden checks what a test wrote against its golden file: the
// tests' side of each wire format's round trip.
package golden

import (
	"bytes"
	"os"
	"testing"
)

// Check fails t when got differs from the file at path; with update, it
// rewrites the file first (go test -update, the flag the caller defines).
func Check(t *testing.T, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("what was written differs from %s:\n%s", path, got)
	}
}
