package convert

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// Kyverno PolicyExceptions: the rules they name (followed through the
// renaming and splitting of the policies converted in the same run), where
// each converted exception goes, and the opt-in of the policies they target.

// optIn is what the exceptions converted for one policy waive, and where
// they came from, to note the opt-in there.
type optIn struct {
	controls  []policyv1alpha1.ControlName
	wholeRule bool
	noters    []*noter
}

// placement is where one converted exception goes and what it matches.
type placement struct {
	namespace string // "" for the cluster exceptions namespace
	match     policyv1alpha1.ExceptionMatch
}

func (c *kyvernoConverter) exception(d *Document, ke *kyvernoException) {
	n := newNoter(c.res, d)
	if len(ke.Spec.Conditions) > 0 {
		n.untranslated("spec.conditions", "conditions have no counterpart; the exception was left out (write what they test as match.names or match.selector)")
		return
	}
	var targets []policyv1alpha1.ExceptionTarget
	for i, t := range ke.Spec.Exceptions {
		targets = append(targets, c.targets(n, t, fmt.Sprintf("spec.exceptions[%d]", i))...)
	}
	if len(targets) == 0 {
		n.untranslated("spec.exceptions", "names no rule that was converted; the exception was left out")
		return
	}
	var entries []policyv1alpha1.PodSecurityExclusion
	noEffect := 0
	for i, e := range ke.Spec.PodSecurity {
		x, outcome := convertEntry(n, e, fmt.Sprintf("spec.podSecurity[%d]", i), "this entry was left out, so the exception waives less")
		switch outcome {
		case entryTranslated:
			entries = append(entries, x)
		case entryNoEffect:
			noEffect++
		}
	}
	if len(ke.Spec.PodSecurity) > 0 && len(entries) == 0 && noEffect == len(ke.Spec.PodSecurity) {
		// Every entry is one Kyverno never matches: the exception waives
		// nothing there, and nothing here.
		n.warn("spec.podSecurity", "no entry ever matches in Kyverno, so the exception waives nothing; it was left out")
		return
	}
	if len(ke.Spec.PodSecurity) > 0 && len(entries) == 0 {
		// An empty podSecurity would waive whole rules.
		n.untranslated("spec.podSecurity", "no entry could be translated; the exception was left out rather than waive whole rules")
		return
	}
	places := c.exceptionPlacements(n, ke.Spec.Match, "spec.match")
	if len(places) == 0 {
		n.untranslated("spec.match", "no filter could be translated; the exception was left out")
		return
	}
	crossNoted := false
	for _, pl := range places {
		ns := pl.namespace
		if ns == "" {
			ns = c.opts.ExceptionsNamespace
			if !crossNoted {
				n.warn("spec.match", "applies in namespaces chosen by glob or selector (or all of them): converted into the cluster exceptions namespace %q, which only cluster admins should write", ns)
				crossNoted = true
			}
		}
		pe := newException(ns, c.exceptionName(ns, ke.Metadata.Name))
		c.recordOptIn(n, targets, entries)
		pe.Spec.Exceptions = targets
		pe.Spec.PodSecurity = entries
		pe.Spec.Background = ke.Spec.Background
		if m := pl.match; len(m.Names) > 0 || m.Selector != nil || len(m.Kinds) > 0 || len(m.Namespaces) > 0 || m.NamespaceSelector != nil {
			mm := m
			pe.Spec.Match = &mm
		}
		c.res.Objects = append(c.res.Objects, Output{From: fmt.Sprintf("%s (%s %s)", d.Where(), d.Kind, d.Name), Object: pe})
	}
	if len(places) > 1 {
		n.warn("spec.match", "a podsieve exception applies in its own namespace: written as %d exceptions", len(places))
	}
}

// recordOptIn notes that the converted policies an exception targets must
// honour it, for the controls its entries name (every control when it waives
// whole rules).
func (c *kyvernoConverter) recordOptIn(n *noter, targets []policyv1alpha1.ExceptionTarget, entries []policyv1alpha1.PodSecurityExclusion) {
	if c.optIn == nil {
		c.optIn = map[string]*optIn{}
	}
	for _, t := range targets {
		o := c.optIn[t.PolicyName]
		if o == nil {
			o = &optIn{}
			c.optIn[t.PolicyName] = o
		}
		if !slices.Contains(o.noters, n) {
			o.noters = append(o.noters, n)
		}
		o.wholeRule = o.wholeRule || len(entries) == 0
		for _, e := range entries {
			if !slices.Contains(o.controls, e.ControlName) {
				o.controls = append(o.controls, e.ControlName)
			}
		}
	}
}

// optInPolicies sets spec.exceptions on the converted policies that
// converted exceptions target: allowedControls lists the controls those
// exceptions waive, or is left unset when one of them waives whole rules.
// The other policies honour no exception, which is podsieve's default.
func (c *kyvernoConverter) optInPolicies() {
	for _, out := range c.res.Objects {
		sp, ok := out.Object.(*policyv1alpha1.SecurityPolicy)
		if !ok || c.optIn[sp.Name] == nil {
			continue
		}
		o := c.optIn[sp.Name]
		for _, n := range o.noters {
			n.warn("spec.exceptions", "podsieve honours PolicyExceptions only for a SecurityPolicy that opts in with spec.exceptions (Kyverno honours them for every policy): "+
				"SecurityPolicy %q opts in, for the controls its converted exceptions waive", sp.Name)
		}
		g := &policyv1alpha1.ExceptionGuardrails{}
		if !o.wholeRule {
			g.AllowedControls = slices.Clone(o.controls)
			slices.Sort(g.AllowedControls)
		}
		sp.Spec.Exceptions = g
	}
}

func (c *kyvernoConverter) exceptionName(ns, name string) string {
	taken := c.exceptionNames[ns]
	if taken == nil {
		taken = map[string]bool{}
		c.exceptionNames[ns] = taken
	}
	out := name
	for i := 2; taken[out]; i++ {
		out = fmt.Sprintf("%s-%d", name, i)
	}
	taken[out] = true
	return out
}

// stripAutogen maps Kyverno's generated rule names for controllers to the
// rule: podsieve evaluates controllers through their pod template under the
// rule's own name.
func stripAutogen(rule string) string {
	for _, p := range []string{"autogen-cronjob-", "autogen-"} {
		if strings.HasPrefix(rule, p) {
			return strings.TrimPrefix(rule, p)
		}
	}
	return rule
}

// targets translates an exception's policy and rule names into the
// converted policies' rules: a Kyverno rule may have become several, or
// moved to another policy; each rule name (a glob) follows every rule it
// matches.
func (c *kyvernoConverter) targets(n *noter, t kyvernoExcTarget, path string) []policyv1alpha1.ExceptionTarget {
	rules, known := c.rules[t.PolicyName]
	if !known {
		return unknownPolicyTargets(n, t, path)
	}
	byPolicy := map[string][]string{}
	var order []string
	for i, r := range t.RuleNames {
		g, err := engine.CompileGlob(stripAutogen(r))
		if err != nil {
			n.untranslated(fmt.Sprintf("%s.ruleNames[%d]", path, i), "%v", err)
			continue
		}
		matched := false
		kyvernoRules := make([]string, 0, len(rules))
		for kr := range rules {
			kyvernoRules = append(kyvernoRules, kr)
		}
		slices.Sort(kyvernoRules)
		for _, kr := range kyvernoRules {
			if !g.Match(kr) {
				continue
			}
			matched = true
			for _, ref := range rules[kr] {
				if _, ok := byPolicy[ref.policy]; !ok {
					order = append(order, ref.policy)
				}
				if !slices.Contains(byPolicy[ref.policy], ref.rule) {
					byPolicy[ref.policy] = append(byPolicy[ref.policy], ref.rule)
				}
			}
		}
		if !matched {
			n.untranslated(fmt.Sprintf("%s.ruleNames[%d]", path, i), "%q names no converted podSecurity rule of policy %q", r, t.PolicyName)
		}
	}
	var out []policyv1alpha1.ExceptionTarget
	for _, p := range order {
		out = append(out, policyv1alpha1.ExceptionTarget{PolicyName: p, RuleNames: byPolicy[p]})
	}
	return out
}

// unknownPolicyTargets keeps the names of a policy the input does not hold,
// with their autogen- prefixes removed and a namespaced Policy's
// "namespace/name" spelled as its converted name.
func unknownPolicyTargets(n *noter, t kyvernoExcTarget, path string) []policyv1alpha1.ExceptionTarget {
	name := t.PolicyName
	if ns, pn, ok := strings.Cut(name, "/"); ok {
		name = ns + "-" + pn
	}
	var names []string
	for i, r := range t.RuleNames {
		r = stripAutogen(r)
		if !strings.ContainsAny(r, "*?") {
			r = ruleName(r)
		} else if _, err := engine.CompileGlob(r); err != nil {
			n.untranslated(fmt.Sprintf("%s.ruleNames[%d]", path, i), "%v; the exception does not name it", err)
			continue
		}
		if !slices.Contains(names, r) {
			names = append(names, r)
		}
	}
	n.warn(path+".policyName", "policy %q is not in the input; the names are kept (autogen- prefixes removed): convert the policy in the same run so that renamed or split rules are followed", t.PolicyName)
	if len(names) == 0 {
		return nil
	}
	return []policyv1alpha1.ExceptionTarget{{PolicyName: name, RuleNames: names}}
}

// exceptionPlacements translates an exception's match into one placement
// per namespace (or one in the cluster exceptions namespace for globs,
// selectors or every namespace). A filter that cannot be translated whole
// is left out, so the exception waives less.
func (c *kyvernoConverter) exceptionPlacements(n *noter, m kyvernoMatch, path string) []placement {
	var filters []kyvernoFilter
	var paths []string
	if len(m.All) > 0 || m.kyvernoFilter.isSet() {
		all := m.All
		if m.kyvernoFilter.isSet() {
			all = append([]kyvernoFilter{m.kyvernoFilter}, all...)
		}
		if len(m.Any) > 0 {
			n.untranslated(path, "both any and all filters; the exception was left out")
			return nil
		}
		f, ok := mergeKyvernoFilters(all)
		if !ok {
			n.untranslated(path+".all", "several filters set the same field; one podsieve match cannot intersect them; the exception was left out")
			return nil
		}
		filters, paths = append(filters, f), append(paths, path+".all")
	}
	for i, f := range m.Any {
		filters, paths = append(filters, f), append(paths, fmt.Sprintf("%s.any[%d]", path, i))
	}
	var out []placement
	for i, f := range filters {
		out = append(out, c.placements(n, f, paths[i])...)
	}
	return out
}

// mergeKyvernoFilters ANDs filters whose fields do not overlap.
func mergeKyvernoFilters(fs []kyvernoFilter) (kyvernoFilter, bool) {
	out := kyvernoFilter{Resources: &kyvernoResources{}}
	r := out.Resources
	for _, f := range fs {
		if len(f.Subjects) > 0 || len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
			out.Subjects = f.Subjects // reported by placements
		}
		fr := f.Resources
		if fr == nil {
			continue
		}
		set := func(dst *[]string, src []string) bool {
			if len(src) == 0 {
				return true
			}
			if len(*dst) > 0 {
				return false
			}
			*dst = src
			return true
		}
		if !set(&r.Kinds, fr.Kinds) || !set(&r.Names, fr.Names) || !set(&r.Namespaces, fr.Namespaces) || !set(&r.Operations, fr.Operations) {
			return out, false
		}
		if fr.Name != "" {
			if r.Name != "" {
				return out, false
			}
			r.Name = fr.Name
		}
		if len(fr.Annotations) > 0 {
			r.Annotations = fr.Annotations
		}
		r.Selector = andSelectors(r.Selector, fr.Selector)
		r.NamespaceSelector = andSelectors(r.NamespaceSelector, fr.NamespaceSelector)
	}
	return out, true
}

// placements translates one filter into where its exceptions go: one per
// namespace it names, or one in the cluster exceptions namespace for
// globs, a namespace selector or every namespace. A filter with a part
// that has no counterpart is left out whole, with a note.
func (c *kyvernoConverter) placements(n *noter, f kyvernoFilter, path string) []placement {
	r := f.Resources
	if r == nil {
		r = &kyvernoResources{}
	}
	names := slices.Clone(r.Names)
	if r.Name != "" {
		names = append(names, r.Name)
	}
	if problems := exceptionFilterProblems(f, r, names, path); len(problems) > 0 {
		for _, p := range problems {
			n.untranslated(p[0], "%s; this filter was left out, so the exception waives less", p[1])
		}
		return nil
	}
	var kinds []policyv1alpha1.PodBearingKind
	if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, "*") {
		for _, k := range r.Kinds {
			if kn := kindName(k); engine.IsPodBearingKind(kn) && !slices.Contains(kinds, policyv1alpha1.PodBearingKind(kn)) {
				kinds = append(kinds, policyv1alpha1.PodBearingKind(kn))
			}
		}
		if len(kinds) == 0 {
			n.warn(path+".resources.kinds", "%s: no kind podsieve evaluates; this filter was left out", strings.Join(r.Kinds, ", "))
			return nil
		}
	}
	base := policyv1alpha1.ExceptionMatch{Names: names, Selector: r.Selector.DeepCopy(), Kinds: kinds}
	return namespacePlacements(n, base, r, path)
}

// exceptionFilterProblems are the parts of a filter a PolicyException cannot
// express, each as its field path and why; names are its names and name.
func exceptionFilterProblems(f kyvernoFilter, r *kyvernoResources, names []string, path string) [][2]string {
	var problems [][2]string
	if len(f.Subjects) > 0 || len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
		problems = append(problems, [2]string{path, "subjects, roles and clusterRoles have no counterpart"})
	}
	if len(r.Annotations) > 0 {
		problems = append(problems, [2]string{path + ".resources.annotations", "an exception cannot select objects by annotation"})
	}
	if len(r.Operations) > 0 && !(slices.Contains(r.Operations, "CREATE") && slices.Contains(r.Operations, "UPDATE")) {
		problems = append(problems, [2]string{path + ".resources.operations", "a podsieve exception applies to creates and updates alike"})
	}
	if !validSelector(r.Selector) {
		problems = append(problems, [2]string{path + ".resources.selector", "wildcards in label selectors have no counterpart"})
	}
	if !validSelector(r.NamespaceSelector) {
		problems = append(problems, [2]string{path + ".resources.namespaceSelector", "wildcards in label selectors have no counterpart"})
	}
	for _, sel := range []struct {
		field string
		s     *metav1.LabelSelector
	}{{"selector", r.Selector}, {"namespaceSelector", r.NamespaceSelector}} {
		if tooLargeSelector(sel.s) {
			problems = append(problems, [2]string{path + ".resources." + sel.field, fmt.Sprintf(
				"a PolicyException's selector holds at most %d requirements of at most %d values", engine.MaxSelectorRequirements, engine.MaxSelectorValues)})
		}
	}
	if !validGlobs(names) {
		problems = append(problems, [2]string{path + ".resources.names", "not a podsieve glob (only *, ** and ? are special)"})
	}
	if !validGlobs(r.Namespaces) {
		problems = append(problems, [2]string{path + ".resources.namespaces", "not a podsieve glob (only *, ** and ? are special)"})
	}
	return problems
}

// namespacePlacements places the match base: in each namespace the filter
// names, and in the cluster exceptions namespace for its namespace globs,
// its namespace selector, or every namespace when it names none.
func namespacePlacements(n *noter, base policyv1alpha1.ExceptionMatch, r *kyvernoResources, path string) []placement {
	var literal, globs []string
	for _, ns := range r.Namespaces {
		switch {
		case strings.ContainsAny(ns, "*?"):
			globs = append(globs, ns)
		case len(validation.IsDNS1123Label(ns)) > 0:
			n.untranslated(path+".resources.namespaces", "%q is not a namespace name; this filter was left out, so the exception waives less", ns)
			return nil
		default:
			literal = append(literal, ns)
		}
	}
	if r.NamespaceSelector != nil || len(r.Namespaces) == 0 {
		m := base
		m.Namespaces = slices.Clone(r.Namespaces)
		if r.NamespaceSelector == nil {
			m.Namespaces = []string{"*"}
		}
		m.NamespaceSelector = r.NamespaceSelector.DeepCopy()
		return []placement{{match: m}}
	}
	var out []placement
	for _, ns := range literal {
		out = append(out, placement{namespace: ns, match: base})
	}
	if len(globs) > 0 {
		m := base
		m.Namespaces = globs
		out = append(out, placement{match: m})
	}
	return out
}

// tooLargeSelector reports whether s holds more than a PolicyException's
// selector may (engine.MaxSelectorRequirements, engine.MaxSelectorValues).
func tooLargeSelector(s *metav1.LabelSelector) bool {
	if s == nil {
		return false
	}
	if len(s.MatchLabels)+len(s.MatchExpressions) > engine.MaxSelectorRequirements {
		return true
	}
	for _, e := range s.MatchExpressions {
		if len(e.Values) > engine.MaxSelectorValues {
			return true
		}
	}
	return false
}
