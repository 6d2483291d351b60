package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/pod-security-admission/api"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// CompileStoredPolicy compiles a SecurityPolicy that the API server stores
// already: one that an earlier podsieve accepted, or that was written while
// the validating webhook was bypassed. A part that this version does not
// compile is not a reason to stop enforcing the rest: it is read at its
// strictest, as the form that admits least, and listed in Policy.Strict
// (docs/semantics.md, "Stored policies that no longer compile"):
//
//   - a podSecurity.exclude entry waives nothing;
//   - a rule's exclude removes no object from the rule;
//   - a part of a rule's match (namespaces, namespaceSelector, selector,
//     runtimeClassNames, usernames) selects every object, so the rule
//     applies more widely, never less;
//   - a level that is not one is restricted; a version that is not one
//     is the v1.N it starts with, else latest;
//   - an action that is not one is Enforce;
//   - a rule's severity, category or controlSeverities that do not compile
//     leave the rule's results at the default severity and category;
//   - a spec.exceptions.controls entry lets no exception waive its control,
//     an unknown allowedControls item allows nothing, and anything else of
//     spec.exceptions that does not compile makes the policy honour no
//     PolicyException.
//
// It fails only for a policy that cannot be read even so: no rules, a rule
// without a name, a rule name used twice. A policy that compiles as written
// compiles exactly as CompilePolicy compiles it, with Strict nil.
func CompileStoredPolicy(sp *policyv1alpha1.SecurityPolicy) (*Policy, error) {
	return compilePolicy(sp, &strictReader{})
}

// StrictReading is one part of a stored policy that does not compile, and
// what podsieve enforces in its place.
type StrictReading struct {
	// Field is the part, as a path in the object:
	// spec.rules[0].podSecurity.exclude[1].
	Field string
	// Problem says why it does not compile and what to write instead; it
	// names the field too.
	Problem string
	// Reading is what is enforced until then: "the entry waives nothing".
	Reading string
}

func (s StrictReading) String() string { return s.Problem + " (until then " + s.Reading + ")" }

// strictReader reads the parts of a stored policy that do not compile at
// their strictest and notes each. A nil *strictReader reads nothing: the
// part's error fails the policy, as CompilePolicy wants.
//
// A collecting one (ValidatePolicy) also goes on past the errors that fail
// even a stored policy (no rules, a rule without a name or with one used
// twice), noted with no reading: it is there to list every error, and what
// it compiles is never used.
type strictReader struct {
	readings []StrictReading
	collect  bool
}

func (r *strictReader) collecting() bool { return r != nil && r.collect }

// note notes an error that has no strict reading (collecting only).
func (r *strictReader) note(err error, field string) {
	r.readings = append(r.readings, StrictReading{Field: field, Problem: err.Error()})
}

// read returns err when r is nil; otherwise it notes the part with the
// reading that replaces it and returns nil.
func (r *strictReader) read(err error, field, reading string) error {
	if r == nil {
		return err
	}
	r.readings = append(r.readings, StrictReading{Field: field, Problem: err.Error(), Reading: reading})
	return nil
}

// levelVersion reads a level that is not one as restricted, and a version
// that is not one as the v1.N it starts with, else as latest.
func (r *strictReader) levelVersion(ps policyv1alpha1.PodSecurity, path string) api.LevelVersion {
	lv := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	if _, err := parseLevelVersion(policyv1alpha1.PodSecurity{Level: ps.Level}, path); err == nil {
		lv.Level = api.Level(ps.Level)
	} else {
		_ = r.read(err, path+".level", "the rule enforces the restricted level")
	}
	if v, err := parseLevelVersion(policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelRestricted, Version: ps.Version}, path); err == nil {
		lv.Version = v.Version
	} else if minor, ok := leadingMinor(ps.Version); ok {
		// "v1.26.0" or "1.26": the version its writer meant. Latest would
		// not be the strictest reading: later versions allow more (sysctls,
		// Windows pods without seccomp).
		lv.Version = api.MajorMinorVersion(1, minor)
		_ = r.read(err, path+".version", fmt.Sprintf("the rule enforces the checks of v1.%d", minor))
	} else {
		_ = r.read(err, path+".version", "the rule enforces the checks of the latest version")
	}
	return lv
}

// leadingMinor reads the minor version of a version written as v1.N or 1.N
// with anything after it.
func leadingMinor(v string) (int, bool) {
	m := leadingMinorRE.FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	minor, err := strconv.Atoi(m[1])
	return minor, err == nil && minor < 1000
}

var leadingMinorRE = regexp.MustCompile(`^v?1\.(0|[1-9][0-9]*)(?:[^0-9]|$)`)

// match compiles a rule's match without the parts that do not compile, each
// noted: a part left out selects every object, so the rule applies to at
// least the objects it was written for.
func (r *strictReader) match(f *policyv1alpha1.ResourceFilter, path string) *filter {
	kept := *f
	for _, part := range []struct {
		field string
		alone policyv1alpha1.ResourceFilter
		drop  func()
	}{
		{"namespaces", policyv1alpha1.ResourceFilter{Namespaces: f.Namespaces}, func() { kept.Namespaces = nil }},
		{"namespaceSelector", policyv1alpha1.ResourceFilter{NamespaceSelector: f.NamespaceSelector}, func() { kept.NamespaceSelector = nil }},
		{"selector", policyv1alpha1.ResourceFilter{Selector: f.Selector}, func() { kept.Selector = nil }},
		{"runtimeClassNames", policyv1alpha1.ResourceFilter{RuntimeClassNames: f.RuntimeClassNames}, func() { kept.RuntimeClassNames = nil }},
		{"usernames", policyv1alpha1.ResourceFilter{Usernames: f.Usernames}, func() { kept.Usernames = nil }},
	} {
		if _, err := compileFilter(&part.alone, path); err != nil {
			_ = r.read(err, path+"."+part.field, "the rule's match ignores its "+part.field)
			part.drop()
		}
	}
	out, err := compileFilter(&kept, path)
	if err != nil {
		// Every part compiles alone; should one day two not compile
		// together, the rule applies to every object.
		_ = r.read(err, path, "the rule applies to every object")
		return &filter{}
	}
	return out
}

// guardrails reads spec.exceptions, which did not compile, so that it
// permits no more than it would have as written: each controls entry that
// does not compile (or names its control twice) leaves its control waivable
// by no exception, an unknown allowedControls item is dropped, and what
// still does not compile after that makes the policy honour no exception.
func (r *strictReader) guardrails(written *policyv1alpha1.ExceptionGuardrails) (*policyv1alpha1.ExceptionGuardrails, map[policyv1alpha1.ControlName]*controlLimit) {
	g := written.DeepCopy()
	if g.AllowedControls != nil {
		g.AllowedControls = r.knownControls(g.AllowedControls)
	}
	var refused []policyv1alpha1.ControlName
	if len(g.Controls) > 0 {
		g.Controls, refused = r.controlLimits(g)
	}
	if len(refused) > 0 {
		allowed := g.AllowedControls
		if allowed == nil {
			allowed = policyv1alpha1.Controls
		}
		g.AllowedControls = slices.DeleteFunc(slices.Clone(allowed), func(c policyv1alpha1.ControlName) bool { return slices.Contains(refused, c) })
	}
	limits, err := compileControlLimits(g)
	if err != nil {
		_ = r.read(err, "spec.exceptions", "the policy honours no PolicyException")
		return &policyv1alpha1.ExceptionGuardrails{Allow: new(false)}, nil
	}
	return g, limits
}

// knownControls are the allowedControls podsieve knows; each other one is
// read as allowing no control.
func (r *strictReader) knownControls(allowed []policyv1alpha1.ControlName) []policyv1alpha1.ControlName {
	known := make([]policyv1alpha1.ControlName, 0, len(allowed))
	for i, c := range allowed {
		if slices.Contains(policyv1alpha1.Controls, c) {
			known = append(known, c)
			continue
		}
		_ = r.read(fmt.Errorf("spec.exceptions.allowedControls[%d]: unknown control %q; use one of %s", i, c, strings.Join(quoteAll(policyv1alpha1.Controls), ", ")),
			fmt.Sprintf("spec.exceptions.allowedControls[%d]", i), "it allows no control")
	}
	return known
}

// controlLimits are the spec.exceptions.controls entries that compile, and
// the controls of those that do not (listed twice, or in error), which no
// exception may then waive. Unbounded is not what refused entries meant: no
// entry kept is nil.
func (r *strictReader) controlLimits(g *policyv1alpha1.ExceptionGuardrails) (kept []policyv1alpha1.ControlGuardrail, refused []policyv1alpha1.ControlName) {
	counts := map[policyv1alpha1.ControlName]int{}
	for _, c := range g.Controls {
		counts[c.ControlName]++
	}
	for i, c := range g.Controls {
		path := fmt.Sprintf("spec.exceptions.controls[%d]", i)
		var err error
		if counts[c.ControlName] > 1 {
			err = fmt.Errorf("%s.controlName: control %q is listed twice; merge the two entries", path, c.ControlName)
		} else if _, err = compileControlLimits(&policyv1alpha1.ExceptionGuardrails{AllowedControls: g.AllowedControls, Controls: []policyv1alpha1.ControlGuardrail{c}}); err != nil {
			// The error names controls[0]: this entry alone.
			err = fmt.Errorf("%s", strings.Replace(err.Error(), "spec.exceptions.controls[0]", path, 1))
		}
		if err != nil {
			_ = r.read(err, path, fmt.Sprintf("no PolicyException may waive control %q", c.ControlName))
			if !slices.Contains(refused, c.ControlName) {
				refused = append(refused, c.ControlName)
			}
			continue
		}
		kept = append(kept, c)
	}
	return kept, refused
}
