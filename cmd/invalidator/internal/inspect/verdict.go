package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/invalidator-go/invalidator/writethrough"
)

// Verdict is what a check found in one key.
type Verdict uint8

const (
	// Consistent: the key is absent, a loader's lease, or at least as new as
	// the change.
	Consistent Verdict = iota
	// Inconsistent: the key holds a version older than the change's.
	Inconsistent
	// Unverified: the key holds a value, but either it or the change has no
	// version to compare.
	Unverified
	// Unreadable: the cache did not answer.
	Unreadable
)

func (v Verdict) String() string {
	if names := [...]string{"consistent", "inconsistent", "unverified", "unreadable"}; int(v) < len(names) {
		return names[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// judge compares what a key holds with the change that invalidated it: its
// version, and whether it deleted the entity. found is the version the key
// holds, when it has one.
func judge(raw []byte, present, deleted bool, want int64, hasWant bool, versionPath []string) (v Verdict, found int64) {
	if !present {
		return Consistent, 0
	}
	s, wt := writethrough.Describe(raw)
	switch {
	case wt && s.Lease:
		return Consistent, 0
	case wt && s.NotFound && deleted:
		// A "not found" cached after a delete keeps the version of the
		// value before it: it is what the source holds.
		return Consistent, s.Version
	}
	found, ok := storedVersion(raw, versionPath)
	switch {
	case !ok || !hasWant:
		return Unverified, found
	case found >= want:
		return Consistent, found
	default:
		return Inconsistent, found
	}
}

// storedVersion is the version of a writethrough entry (when its cache has
// a VersionOf), else the number at versionPath in a JSON value.
func storedVersion(raw []byte, versionPath []string) (int64, bool) {
	if s, ok := writethrough.Describe(raw); ok {
		return s.Version, s.Version > 0
	}
	if len(versionPath) == 0 {
		return 0, false
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return 0, false
	}
	for _, name := range versionPath {
		obj, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		if v, ok = obj[name]; !ok {
			return 0, false
		}
	}
	var text string
	switch n := v.(type) {
	case json.Number:
		text = n.String()
	case string:
		text = n
	default:
		return 0, false
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err == nil
}

// ParsePath splits a dotted JSON path ("meta.version") into its names; an
// empty name is an error.
func ParsePath(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	names := strings.Split(strings.TrimPrefix(path, "."), ".")
	if slices.Contains(names, "") {
		return nil, fmt.Errorf("%q: want names joined by dots, like meta.version", path)
	}
	return names, nil
}
