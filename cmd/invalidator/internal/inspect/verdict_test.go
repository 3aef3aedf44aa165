package inspect

import (
	"math"
	"testing"
)

// Entries as writethrough stores them: a lease, and a value at version 7.
const (
	lease = "wt1|l|0123456789abcdef|"
	wtV7  = `wt1|v|0123456789abcdef|7|1000|1893456000000|{"name":"x"}`
	wtV0  = `wt1|v|0123456789abcdef|0|1000|1893456000000|{"name":"x"}`
	// A "not found" keeps the version of the value before it.
	wtNotFound = `wt1|n|0123456789abcdef|7|1000|1893456000000|`
)

func TestJudge(t *testing.T) {
	path, _ := ParsePath("meta.version")
	for _, c := range []struct {
		name    string
		raw     string
		present bool
		deleted bool
		want    int64
		hasWant bool
		verdict Verdict
	}{
		{"absent", "", false, false, 7, true, Consistent},
		{"a lease", lease, true, false, 7, true, Consistent},
		{"a lease, the change unversioned", lease, true, false, 0, false, Consistent},
		{"writethrough, as new", wtV7, true, false, 7, true, Consistent},
		{"writethrough, newer", wtV7, true, false, 6, true, Consistent},
		{"writethrough, older", wtV7, true, false, 8, true, Inconsistent},
		{"writethrough without VersionOf", wtV0, true, false, 8, true, Unverified},
		{"JSON at the path, older", `{"meta":{"version":3}}`, true, false, 4, true, Inconsistent},
		{"JSON at the path, a string", `{"meta":{"version":"4"}}`, true, false, 4, true, Consistent},
		{"JSON without the path", `{"version":3}`, true, false, 4, true, Unverified},
		{"not JSON", `plain`, true, false, 4, true, Unverified},
		{"the change unversioned", `{"meta":{"version":3}}`, true, false, 0, false, Unverified},
		{"not found after a delete", wtNotFound, true, true, 8, true, Consistent},
		{"not found after an update", wtNotFound, true, false, 8, true, Inconsistent},
		{"a value after a delete", wtV7, true, true, 8, true, Inconsistent},
	} {
		if v, _ := judge([]byte(c.raw), c.present, c.deleted, c.want, c.hasWant, path); v != c.verdict {
			t.Errorf("%s: %v, want %v", c.name, v, c.verdict)
		}
	}
}

func TestNines(t *testing.T) {
	if n, _ := (DelayReport{Unverified: 5}).Nines(); !math.IsNaN(n) {
		t.Errorf("nothing compared: %v nines, want NaN", n)
	}
	for _, c := range []struct {
		d       DelayReport
		nines   float64
		atLeast bool
	}{
		{DelayReport{Consistent: 999, Inconsistent: 1}, 3, false},
		{DelayReport{Consistent: 99, Inconsistent: 1, Unverified: 50, Unreadable: 9}, 2, false},
		{DelayReport{Consistent: 10000}, 4, true}, // no more than 10,000 checks can show
		{DelayReport{Inconsistent: 10}, 0, false}, // all inconsistent: +0, not -0
	} {
		n, atLeast := c.d.Nines()
		if n != c.nines || atLeast != c.atLeast { // exact: 4 nines are 4, not 3.99
			t.Errorf("%+v: %v nines (at least %v), want %v (%v)", c.d, n, atLeast, c.nines, c.atLeast)
		}
	}
}
