package admissionpolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/podsieve/podsieve/internal/engine"
)

// The CEL here is written for the API server's environment: no let
// bindings and homogeneous aggregate literals (every map and list literal
// holds values of one type, hence the dyn() around each value of a
// record), and only the libraries of Kubernetes 1.30 and later (optional
// types, the strings extension, regex), so that one compiled policy serves
// every version that has ValidatingAdmissionPolicy v1. "Let" is written as
// [value].map(name, body)[0].

// quote is a CEL string literal of s. Go's quoting escapes are CEL's.
func quote(s string) string { return strconv.Quote(s) }

// quoteList is a CEL list literal of strings.
func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// record is a CEL map literal with dyn values, in the order given.
func record(kv ...string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: dyn(%s)", quote(kv[i]), kv[i+1])
	}
	b.WriteString("}")
	return b.String()
}

// globSet is a list of globs in the form the CEL tests: the literal ones
// compared as strings, the others as regular expressions, and any set when
// one glob is "*".
type globSet struct {
	Any      bool
	Exact    []string
	Patterns []string
}

// compileGlobs turns globs into a globSet; they must compile
// (engine.CompileGlob), which the engine checked before.
func compileGlobs(globs []string) (globSet, error) {
	var gs globSet
	for _, g := range globs {
		switch {
		case g == "*":
			gs.Any = true
		case !strings.ContainsAny(g, "*?"):
			gs.Exact = append(gs.Exact, g)
		default:
			re, err := engine.GlobRegexp(g)
			if err != nil {
				return globSet{}, err
			}
			gs.Patterns = append(gs.Patterns, re)
		}
	}
	return gs, nil
}

// matchExpr is CEL that tests the string expression s against the set,
// inlined as constants.
func (gs globSet) matchExpr(s string) string {
	if gs.Any {
		return "true"
	}
	var alts []string
	switch len(gs.Exact) {
	case 0:
	case 1:
		alts = append(alts, s+" == "+quote(gs.Exact[0]))
	default:
		alts = append(alts, s+" in "+quoteList(gs.Exact))
	}
	for _, p := range gs.Patterns {
		alts = append(alts, s+".matches("+quote(p)+")")
	}
	if len(alts) == 0 {
		return "false"
	}
	return "(" + strings.Join(alts, " || ") + ")"
}

// paramGlobs is CEL that tests the string expression s against a globSet
// held in the parameters (expression g).
func paramGlobs(g, s string) string {
	return fmt.Sprintf("(%[1]s.?any.orValue(false) == true || %[2]s in %[1]s.?exact.orValue([]) || %[1]s.?patterns.orValue([]).exists(p, %[2]s.matches(p)))", g, s)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
