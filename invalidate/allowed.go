package invalidate

import (
	"fmt"
	"slices"
	"strings"
)

// allowed is the set of keys the worker may delete: glob patterns as
// Valkey's ACL key patterns (~cache:*) read them, * and ? only, so that the
// rules and the cache user can be given the same ones.
type allowed struct {
	patterns []string
	derived  bool // from the templates, the rules naming none
}

// checkPattern refuses what the two would read differently.
func checkPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: allowedKeys holds an empty pattern", ErrRules)
	case strings.ContainsAny(p, `[]\`):
		return fmt.Errorf("%w: allowedKeys pattern %q: only * and ? are wildcards here", ErrRules, p)
	}
	return nil
}

// derive allows what the templates can plan: each one's literal text up
// to its first placeholder, then anything; a template that begins with a
// placeholder allows every key.
func derive(sets ...[]template) allowed { return reduce(patternsOf("", sets...)) }

// patternsOf are the patterns of the keys the templates plan under prefix.
func patternsOf(prefix string, sets ...[]template) []string {
	var patterns []string
	for _, set := range sets {
		for _, t := range set {
			p := t.raw
			if i := strings.IndexByte(p, '{'); i >= 0 {
				p = p[:i] + "*"
			}
			patterns = append(patterns, prefix+p)
		}
	}
	return patterns
}

// reduce allows the patterns derived, each once, without those another
// one covers: cache:* makes cache:product:* and cache:list say nothing more.
func reduce(patterns []string) allowed {
	a := allowed{derived: true}
	seen := map[string]bool{}
	for _, p := range patterns {
		if !seen[p] {
			seen[p] = true
			a.patterns = append(a.patterns, p)
		}
	}
	all := slices.Clone(a.patterns)
	a.patterns = slices.DeleteFunc(a.patterns, func(p string) bool {
		for _, q := range all {
			if q != p && strings.HasSuffix(q, "*") && strings.HasPrefix(p, q[:len(q)-1]) {
				return true
			}
		}
		return false
	})
	return a
}

// permits says whether key matches one of the patterns.
func (a allowed) permits(key string) bool {
	for _, p := range a.patterns {
		if globMatch(p, key) {
			return true
		}
	}
	return false
}

// globMatch matches s against pattern, where * is any run of bytes and ?
// any one byte, as Valkey's stringmatch does for them.
func globMatch(pattern, s string) bool {
	// The classic linear matcher: on a mismatch, go back to the last *.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p, mark = star+1, mark+1
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
