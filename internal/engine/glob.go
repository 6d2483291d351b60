package engine

import (
	"fmt"
	"regexp"
	"strings"
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
	re      *regexp.Regexp
}

// CompileGlob parses a glob; the error says what is wrong with it.
func CompileGlob(s string) (Glob, error) {
	switch {
	case s == "":
		return Glob{}, fmt.Errorf("empty glob: write a name, or \"*\" for any")
	case strings.ContainsAny(s, `[]\`):
		return Glob{}, fmt.Errorf("glob %q: only *, ** and ? are special; character classes and escapes ([, ], \\) are not supported", s)
	case s == "*":
		return Glob{raw: s, any: true}, nil
	case !strings.ContainsAny(s, "*?"):
		return Glob{raw: s, literal: true}, nil
	}
	var b strings.Builder
	b.WriteString(`^`)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '*' && i+1 < len(s) && s[i+1] == '*':
			for i+1 < len(s) && s[i+1] == '*' {
				i++
			}
			b.WriteString(`.*`)
		case s[i] == '*':
			b.WriteString(`[^/]*`)
		case s[i] == '?':
			b.WriteString(`[^/]`)
		default:
			b.WriteString(regexp.QuoteMeta(s[i : i+1]))
		}
	}
	b.WriteString(`$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return Glob{}, fmt.Errorf("glob %q: %w", s, err)
	}
	return Glob{raw: s, prefix: s[:strings.IndexAny(s, "*?")], re: re}, nil
}

// Match reports whether s matches the glob.
func (g Glob) Match(s string) bool {
	switch {
	case g.any:
		return true
	case g.literal:
		return g.raw == s
	default:
		// Most globs start with a literal (registry.example/team-*): a
		// prefix test rejects most strings before the regexp runs.
		return strings.HasPrefix(s, g.prefix) && g.re.MatchString(s)
	}
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
