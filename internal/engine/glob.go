package engine

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Glob is a compiled glob. The dialect is podsieve's everywhere the API takes
// globs:
//
//   - any run of characters within one "/"-separated segment
//     **  any run of characters, across segments
//     ?   one character other than "/"
//
// A glob that is exactly "*" matches every string, because that is what a
// person writing `images: ["*"]` means. Keeping "*" inside one segment is what
// stops `registry.io/team*` from matching `registry.io/team-evil/app`.
// Character classes and escapes ([, ], \) are reserved and refused.
type Glob struct {
	raw     string
	literal bool
	any     bool
	prefix  string // the literal text before the first wildcard
	skip    int    // the number of tokens in prefix
	// tokens are the glob's runes, with doubleStar for "**"; "*" and "?" are
	// always wildcards because a glob has no escapes.
	tokens []rune
}

// doubleStar stands for "**" in Glob.tokens.
const doubleStar rune = -1

// CompileGlob parses a glob; the error says what is wrong with it.
//
// Globs are matched by a small automaton instead of a regular expression: a
// compiled regexp costs about 2 KiB, which is most of an exception's memory
// when a cluster holds 100,000 of them.
func CompileGlob(s string) (Glob, error) {
	switch {
	case s == "":
		return Glob{}, fmt.Errorf("empty glob: write a name, or \"*\" for any")
	case strings.ContainsAny(s, `[]\`):
		return Glob{}, fmt.Errorf("glob %q: only *, ** and ? are special; character classes and escapes ([, ], \\) are not supported", s)
	case !utf8.ValidString(s):
		return Glob{}, fmt.Errorf("glob %q: not valid UTF-8", s)
	case s == "*":
		return Glob{raw: s, any: true}, nil
	case !strings.ContainsAny(s, "*?"):
		return Glob{raw: s, literal: true}, nil
	}
	tokens := make([]rune, 0, len(s))
	for i, r := range s {
		if r == '*' && i > 0 && s[i-1] == '*' {
			// A run of stars is one "**"; the tokens keep one per run.
			tokens[len(tokens)-1] = doubleStar
			continue
		}
		tokens = append(tokens, r)
	}
	prefix := s[:strings.IndexAny(s, "*?")]
	return Glob{raw: s, prefix: prefix, skip: utf8.RuneCountInString(prefix), tokens: slices.Clip(tokens)}, nil
}

// Match reports whether s matches the glob. A string that is not valid UTF-8
// (which nothing decoded from the API is) matches only "*": literal and
// automaton would otherwise read its invalid bytes differently.
func (g Glob) Match(s string) bool {
	switch {
	case g.any:
		return true
	case !utf8.ValidString(s):
		return false
	case g.literal:
		return g.raw == s
	default:
		// Most globs start with a literal (registry.example/team-*): a
		// prefix test rejects most strings before the automaton runs.
		return strings.HasPrefix(s, g.prefix) && g.run(s[len(g.prefix):], g.skip)
	}
}

// run simulates the glob's automaton on s, starting at token skip (the
// literal prefix already matched). State i means "tokens before i are
// matched"; a star state also stands for the state after it, since a star
// may match nothing. The cost is len(s) × len(tokens), without backtracking.
func (g Glob) run(s string, skip int) bool {
	t := g.tokens[skip:]
	n := len(t)
	if n >= 64 {
		return g.runLong(s, t)
	}
	closure := func(set uint64) uint64 {
		for i := 0; i < n; i++ {
			if set&(1<<i) != 0 && (t[i] == '*' || t[i] == doubleStar) {
				set |= 1 << (i + 1)
			}
		}
		return set
	}
	cur := closure(1)
	for _, c := range s {
		var next uint64
		for i := 0; i < n; i++ {
			if cur&(1<<i) == 0 {
				continue
			}
			switch t[i] {
			case doubleStar:
				next |= 1 << i
			case '*':
				if c != '/' {
					next |= 1 << i
				}
			case '?':
				if c != '/' {
					next |= 1 << (i + 1)
				}
			default:
				if c == t[i] {
					next |= 1 << (i + 1)
				}
			}
		}
		if next == 0 {
			return false
		}
		cur = closure(next)
	}
	return cur&(1<<n) != 0
}

// runLong is run for globs of 64 tokens or more, with a slice as the set.
func (g Glob) runLong(s string, t []rune) bool {
	n := len(t)
	cur, next := make([]bool, n+1), make([]bool, n+1)
	closure := func(set []bool) {
		for i := 0; i < n; i++ {
			if set[i] && (t[i] == '*' || t[i] == doubleStar) {
				set[i+1] = true
			}
		}
	}
	cur[0] = true
	closure(cur)
	for _, c := range s {
		clear(next)
		any := false
		for i := 0; i < n; i++ {
			if !cur[i] {
				continue
			}
			switch {
			case t[i] == doubleStar, t[i] == '*' && c != '/':
				next[i], any = true, true
			case t[i] == '?' && c != '/', t[i] == c:
				next[i+1], any = true, true
			}
		}
		if !any {
			return false
		}
		closure(next)
		cur, next = next, cur
	}
	return cur[n]
}

// String is the glob as written.
func (g Glob) String() string { return g.raw }

// Globs is a list of globs that matches when any of them does.
type Globs []Glob

// CompileGlobs compiles every glob; the error names the first bad one by index.
func CompileGlobs(ss []string) (Globs, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	gs := make(Globs, 0, len(ss))
	for i, s := range ss {
		g, err := CompileGlob(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// Match reports whether any glob matches s.
func (gs Globs) Match(s string) bool {
	for _, g := range gs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

// Patterns are the globs as written.
func (gs Globs) Patterns() []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.raw
	}
	return out
}
