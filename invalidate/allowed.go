package invalidate

import (
	"fmt"
	"strings"
)

// allowed is the set of keys the worker may delete: glob patterns read as
// Valkey reads an ACL user's key patterns (~cache:*), so that the rules and
// the cache user can be given the same ones.
type allowed struct {
	patterns []string
	derived  bool // from the templates, the rules naming none
}

// checkPattern refuses, of the patterns given in allowedKeys, what the
// worker and the cache would not read the same way: a range in a class
// between bytes of which one is not ASCII, which Valkey compares as C
// chars, signed on x86 and unsigned on ARM.
func checkPattern(p string) error {
	if p == "" {
		return fmt.Errorf("%w: allowedKeys holds an empty pattern", errRules)
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			var bad bool
			_, rest := readClass(p[i+1:], func(lo, hi byte) { bad = bad || lo != hi && (lo >= 0x80 || hi >= 0x80) })
			if bad {
				return fmt.Errorf("%w: allowedKeys pattern %q: a range in [] between bytes that are not both ASCII means one thing to Valkey on x86 and another on ARM", errRules, p)
			}
			i = len(p) - len(rest) - 1
		}
	}
	return nil
}

// literalPattern is what allows exactly the key, or with wild every key
// that begins with it: the key with what Valkey's patterns read as special
// escaped, then, with wild, *.
func literalPattern(key string, wild bool) string {
	var b strings.Builder
	for i := range len(key) {
		if strings.IndexByte(`*?[]\`, key[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	if wild {
		b.WriteByte('*')
	}
	return b.String()
}

// prefix is the literal text of the keys a template plans, up to its first
// placeholder, and whether it has one: the keys it plans all begin with
// it, or, without one, are it.
type prefix struct {
	text string
	wild bool
}

// prefixOf is the prefix of the keys t plans under under (the tag prefix,
// for a tag's key): hash-tag braces are literal text like any other.
func prefixOf(under string, t template) prefix {
	p := prefix{text: under}
	for _, seg := range t.segments {
		if seg.src != literal {
			p.wild = true
			break
		}
		p.text += seg.text
	}
	return p
}

// covers says whether every key of o begins with p's wild prefix.
func (p prefix) covers(o prefix) bool { return p.wild && p != o && strings.HasPrefix(o.text, p.text) }

// derive allows the keys of the prefixes, each once, without those another
// one covers: cache:* makes cache:product:* and cache:list say nothing
// more.
func derive(prefixes []prefix) allowed {
	a := allowed{derived: true}
	seen := map[prefix]bool{}
	for _, p := range prefixes {
		covered := false
		for _, q := range prefixes {
			covered = covered || q.covers(p)
		}
		if !seen[p] && !covered {
			seen[p] = true
			a.patterns = append(a.patterns, literalPattern(p.text, p.wild))
		}
	}
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

// globMatch matches s against pattern as Valkey's stringmatchlen does
// (util.c, case-sensitive, as the ACL checks keys): * is any run of
// bytes, ? any one byte, [...] one byte of a class, \ makes the next byte
// literal, and what ends a pattern early is read as Valkey reads it.
func globMatch(pattern, s string) bool {
	skipLonger := false
	return stringMatch(pattern, s, &skipLonger, 0)
}

// stringMatch is stringmatchlen_impl, step for step: skipLonger ends the
// search once the rest of the pattern after a * matched nowhere, and
// patterns nested deeper than 1,000 stars match nothing.
func stringMatch(p, s string, skipLonger *bool, nesting int) bool {
	if nesting > 1000 {
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for ; len(s) > 0; s = s[1:] {
				if stringMatch(p[1:], s, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
			}
			*skipLonger = true
			return false
		case '?':
			p, s = p[1:], s[1:]
		case '[':
			match := false
			negated, rest := readClass(p[1:], func(lo, hi byte) { match = match || lo <= s[0] && s[0] <= hi })
			if match == negated {
				return false
			}
			p, s = rest, s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			p, s = p[1:], s[1:]
		}
		if len(s) == 0 { // what is left of the pattern may be stars
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

// readClass reads the class whose text follows a [ in p as stringmatchlen
// does, calling member for each byte it holds (lo == hi) or range, and
// returns whether ^ negates it and what follows its ]: \ makes the next
// byte a member, a-z is a range either way round, a ] first ends it empty,
// and without a ] it runs to the end of the pattern.
func readClass(p string, member func(lo, hi byte)) (negated bool, rest string) {
	if negated = len(p) > 0 && p[0] == '^'; negated {
		p = p[1:]
	}
	for {
		switch {
		case len(p) >= 2 && p[0] == '\\':
			member(p[1], p[1])
			p = p[2:]
		case len(p) == 0:
			return negated, p
		case p[0] == ']':
			return negated, p[1:]
		case len(p) >= 3 && p[1] == '-':
			lo, hi := p[0], p[2]
			member(min(lo, hi), max(lo, hi))
			p = p[3:]
		default:
			member(p[0], p[0])
			p = p[1:]
		}
	}
}
