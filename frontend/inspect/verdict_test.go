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
)

func TestJudge(t *testing.T) {
	path := ParsePath("meta.version")
	for _, c := range []struct {
		name    string
		raw     string
		present bool
		want    int64
		hasWant bool
		verdict Verdict
	}{
		{"absent", "", false, 7, true, Consistent},
		{"a lease", lease, true, 7, true, Consistent},
		{"a lease, the change unversioned", lease, true, 0, false, Consistent},
		{"writethrough, as new", wtV7, true, 7, true, Consistent},
		{"writethrough, newer", wtV7, true, 6, true, Consistent},
		{"writethrough, older", wtV7, true, 8, true, Inconsistent},
		{"writethrough without VersionOf", wtV0, true, 8, true, Unverified},
		{"JSON at the path, older", `{"meta":{"version":3}}`, true, 4, true, Inconsistent},
		{"JSON at the path, a string", `{"meta":{"version":"4"}}`, true, 4, true, Consistent},
		{"JSON without the path", `{"version":3}`, true, 4, true, Unverified},
		{"not JSON", `plain`, true, 4, true, Unverified},
		{"the change unversioned", `{"meta":{"version":3}}`, true, 0, false, Unverified},
	} {
		if v, _ := judge([]byte(c.raw), c.present, c.want, c.hasWant, path); v != c.verdict {
			t.Errorf("%s: %v, want %v", c.name, v, c.verdict)
		}
	}
}

func TestNines(t *testing.T) {
	for _, c := range []struct {
		d       DelayReport
		nines   float64
		atLeast bool
	}{
		{DelayReport{Consistent: 999, Inconsistent: 1}, 3, false},
		{DelayReport{Consistent: 99, Inconsistent: 1, Unverified: 50, Unreadable: 9}, 2, false},
		{DelayReport{Consistent: 10000}, 4, true}, // no more than 10,000 checks can show
		{DelayReport{}, 0, true},
	} {
		n, atLeast := c.d.Nines()
		if math.Abs(n-c.nines) > 1e-9 || atLeast != c.atLeast {
			t.Errorf("%+v: %v nines (at least %v), want %v (%v)", c.d, n, atLeast, c.nines, c.atLeast)
		}
	}
}
