package invalidate

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/invalidator-go/invalidator/events"
	"github.com/invalidator-go/invalidator/localstack/testenv"
)

// globCases are patterns and keys as Valkey's stringmatchlen reads them,
// its odd corners included; TestGlobMatchAgreesWithTheACL asks the server.
var globCases = []struct {
	pattern, key string
	want         bool
}{
	{"cache:*", "cache:", true}, {"cache:*", "cach", false}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false},
	{"a?c", "abc", true}, {"*:x", "a:b:x", true}, {"ab", "abc", false}, {"a**b", "ab", true}, {"*", "x", true},
	{"*a*b", "xaxxb", true}, {"*[0-9]", "key7", true}, {"*[0-9]", "key", false},
	// \ makes the next byte literal; alone at the end it is one.
	{`a\*b`, "a*b", true}, {`a\*b`, "axb", false}, {`a\?`, "a?", true}, {`a\?`, "ab", false},
	{`\[ab\]`, "[ab]", true}, {`\[ab\]`, "a", false}, {`a\\b`, `a\b`, true}, {`a\`, `a\`, true}, {`a\`, "a", false},
	// Classes: negated, ranges either way round, \ inside, a ] first
	// ending one empty, one without its ] running to the end.
	{"[ab]x", "ax", true}, {"[ab]x", "cx", false}, {"[^ab]x", "cx", true}, {"[^ab]x", "ax", false},
	{"[a-c]", "b", true}, {"[c-a]", "b", true}, {"[a-c]", "d", false}, {`[\]]`, "]", true}, {`[\]]`, `\`, false},
	{"[a-]", "]", true}, {"[a-]", "^", true}, {"[a-]", "b", false}, {"[]a]", "a]", false}, {"[^]a", "xa", true},
	{"[ab", "a", true}, {"[ab", "ab", false}, {"[a]*", "a", true}, {"x[", "x[", false},
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range globCases {
		if got := globMatch(tc.pattern, tc.key); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pattern, tc.key, got)
		}
	}
}

// derivedCases are rules without allowedKeys, the patterns derived from
// them, and keys each allows and refuses: the literal text of a template
// up to its first placeholder, braces of hash tags and {{ included, with
// what a pattern reads as special escaped.
var derivedCases = []struct {
	rules            string
	patterns         []string
	allowed, refused []string
}{
	{`default: ["{user:{id}}:profile"]`, []string{`{user:*`},
		[]string{"{user:1}:profile", "{user:"}, []string{"session:abc", "lock:orders", "{user", "{usex:1}:profile"}},
	{`default: ["cache:a*b?:{id}"]`, []string{`cache:a\*b\?:*`},
		[]string{"cache:a*b?:1"}, []string{"cache:aXbY:1", "cache:a*bY:1", "cache:a*b?"}},
	{`default: ["cache:[ab]:{id}", "cache:back\\slash:{id}"]`, []string{`cache:\[ab\]:*`, `cache:back\\slash:*`},
		[]string{"cache:[ab]:1", `cache:back\slash:1`}, []string{"cache:a:1", "cache:backslash:1", `cache:back\\slash:1`}},
	{`default: ["cache:{{id}:x", "cache:p:{id}"]`, []string{`cache:{id}:x`, `cache:p:*`},
		[]string{"cache:{id}:x", "cache:p:1"}, []string{"cache:{id}:xy", "cache:1:x"}},
	{`{tagPrefix: "t*[", tags: {entities: {p: ["p:{id}"]}}}`, []string{`cache:*`, `t\*\[p:*`, `t\*\[`},
		[]string{"cache:p:1", "t*[p:1", "t*["}, []string{"t*[q:1", "tx[p:1", "t*[x"}},
}

func TestDerivedAllowedKeys(t *testing.T) {
	for _, tc := range derivedCases {
		r, err := ParseRules([]byte(tc.rules))
		if err != nil {
			t.Fatalf("%s: %v", tc.rules, err)
		}
		if got, derived := r.AllowedKeys(); !derived || strings.Join(got, " ") != strings.Join(tc.patterns, " ") {
			t.Errorf("%s: derived %q, want %q", tc.rules, got, tc.patterns)
		}
		for _, key := range append(tc.allowed, tc.refused...) {
			if got := r.allowed.permits(key); got != slices.Contains(tc.allowed, key) {
				t.Errorf("%s: %q allowed: %v", tc.rules, key, got)
			}
		}
	}
	// A hash tag's braces are literal text: the template still plans its key.
	r := mustRules(t, `default: ["{user:{id}}:profile"]`)
	if keys, err := r.Keys(&events.Change{Entity: "user", ID: "1"}, nil); err != nil || strings.Join(keys, " ") != "{user:1}:profile" {
		t.Errorf("{user:{id}}:profile planned %q, %v", keys, err)
	}
	if _, err := r.Keys(&events.Change{Entity: "user", Keys: []string{"session:abc", "lock:orders"}}, nil); !errors.Is(err, errPlan) {
		t.Errorf("explicit keys outside {user:*: %v, want ErrPlan", err)
	}
}

// TestEveryKeyIsNeverDerived: a key template that begins with a
// placeholder would derive *, every key: the rules are refused unless they
// give allowedKeys.
func TestEveryKeyIsNeverDerived(t *testing.T) {
	for _, rules := range []string{`default: ["{entity}:{id}"]`, `entities: {p: ["cache:p:{id}", "{id}"]}`, `tables: {T: ["{key.id}"]}`} {
		if _, err := ParseRules([]byte(rules)); !errors.Is(err, errRules) || !strings.Contains(err.Error(), "begins with a placeholder") {
			t.Errorf("%s: %v, want refused", rules, err)
		}
		if _, err := ParseRules([]byte(rules + "\nallowedKeys: [\"cache:*\"]")); err != nil {
			t.Errorf("%s with allowedKeys: %v", rules, err)
		}
	}
}

// TestAllowedKeysAgreeWithTheACL asks a real server, with ACL DRYRUN,
// whether a user given patterns as ~pattern may UNLINK each key: the
// worker must answer as the cache does, and as the tables say, for the
// patterns of globCases and for those it derives from derivedCases' rules.
func TestAllowedKeysAgreeWithTheACL(t *testing.T) {
	var node valkey.Client
	for _, n := range testenv.Cache(t).Nodes() {
		node = n // ACL users are a node's own: one node answers for all
		break
	}
	user := "dryrun-" + strings.ToLower(rand.Text()[:8])
	t.Cleanup(func() { node.Do(context.Background(), node.B().AclDeluser().Username(user).Build()) })
	// allows says whether the server lets a user with the patterns UNLINK key.
	allows := func(patterns []string, key string) bool {
		t.Helper()
		args := []string{user, "reset", "+unlink"}
		for _, p := range patterns {
			args = append(args, "~"+p)
		}
		if err := node.Do(t.Context(), node.B().Arbitrary("ACL", "SETUSER").Args(args...).Build()).Error(); err != nil {
			t.Fatalf("ACL SETUSER %q: %v", args, err)
		}
		answer, err := node.Do(t.Context(), node.B().Arbitrary("ACL", "DRYRUN").Args(user, "UNLINK", key).Build()).ToString()
		if err != nil {
			t.Fatalf("ACL DRYRUN %s UNLINK %q: %v", user, key, err)
		}
		return answer == "OK"
	}
	for _, tc := range globCases {
		if server, worker := allows([]string{tc.pattern}, tc.key), globMatch(tc.pattern, tc.key); server != tc.want || worker != server {
			t.Errorf("~%s and %q: the server allows it: %v, the worker: %v, want %v", tc.pattern, tc.key, server, worker, tc.want)
		}
	}
	for _, tc := range derivedCases {
		r, err := ParseRules([]byte(tc.rules))
		if err != nil {
			t.Fatalf("%s: %v", tc.rules, err)
		}
		patterns, _ := r.AllowedKeys()
		for _, key := range append(tc.allowed, tc.refused...) {
			server, worker, want := allows(patterns, key), r.allowed.permits(key), slices.Contains(tc.allowed, key)
			if server != want || worker != server {
				t.Errorf("%s: %q under %q: the server allows it: %v, the worker: %v, want %v", tc.rules, key, patterns, server, worker, want)
			}
		}
	}
}
