package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// The match and exclude filters of Kyverno rules: what of them a podsieve
// ResourceFilter can say, and how the translated filters combine.

func globMatch(glob, s string) bool {
	g, err := engine.CompileGlob(glob)
	return err == nil && g.Match(s)
}

// kindName is the kind of a Kyverno kinds entry: "apps/v1/Deployment",
// "v1/Pod" or "Pod/ephemeralcontainers" (a subresource) are Deployment,
// Pod and "" (not a kind podsieve evaluates).
func kindName(k string) string {
	if strings.Contains(k, "/") {
		parts := strings.Split(k, "/")
		last := parts[len(parts)-1]
		if last != "" && last[0] >= 'a' && last[0] <= 'z' {
			return "" // a subresource
		}
		return last
	}
	return k
}

func hasKind(kinds []string, kind string) bool {
	return slices.ContainsFunc(kinds, func(k string) bool { return k == "*" || kindName(k) == kind })
}

func hasWildcardValues(s *metav1.LabelSelector) bool {
	if s == nil {
		return false
	}
	for k, v := range s.MatchLabels {
		if strings.ContainsAny(k+v, "*?") {
			return true
		}
	}
	for _, e := range s.MatchExpressions {
		if strings.ContainsAny(e.Key+strings.Join(e.Values, ""), "*?") {
			return true
		}
	}
	return false
}

func validSelector(s *metav1.LabelSelector) bool {
	if s == nil {
		return true
	}
	_, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && !hasWildcardValues(s)
}

func validGlobs(gs []string) bool {
	_, err := engine.CompileGlobs(gs)
	return err == nil
}

// filterProblems lists what of a Kyverno filter podsieve cannot express in a
// ResourceFilter (which has namespaces, namespaceSelector and selector),
// each with its field.
func filterProblems(f kyvernoFilter, path string) [][2]string {
	var out [][2]string
	add := func(field, msg string) { out = append(out, [2]string{path + field, msg}) }
	if len(f.Subjects) > 0 || len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
		add("", "subjects, roles and clusterRoles have no counterpart: podsieve decides on the object, not on who sends it")
	}
	r := f.Resources
	if r == nil {
		return out
	}
	if len(r.Kinds) > 0 && !hasKind(r.Kinds, string(policyv1alpha1.KindPod)) {
		add(".resources.kinds", fmt.Sprintf("%s: podsieve rules apply to every pod-bearing kind, through the pod template; only a filter that includes Pod (which Kyverno extends to controllers) translates", strings.Join(r.Kinds, ", ")))
	}
	if r.Name != "" || len(r.Names) > 0 {
		add(".resources.names", "a SecurityPolicy rule cannot select objects by name")
	}
	if len(r.Annotations) > 0 {
		add(".resources.annotations", "a SecurityPolicy rule cannot select objects by annotation")
	}
	if len(r.Operations) > 0 && !(slices.Contains(r.Operations, "CREATE") && slices.Contains(r.Operations, "UPDATE")) {
		add(".resources.operations", "podsieve judges creates and updates alike")
	}
	if !validGlobs(r.Namespaces) {
		add(".resources.namespaces", "not a podsieve glob (only *, ** and ? are special)")
	}
	if !validSelector(r.Selector) {
		add(".resources.selector", "wildcards in label selectors have no counterpart")
	}
	if !validSelector(r.NamespaceSelector) {
		add(".resources.namespaceSelector", "wildcards in label selectors have no counterpart")
	}
	return out
}

// toFilter translates what can be of a Kyverno filter.
func toFilter(f kyvernoFilter) *policyv1alpha1.ResourceFilter {
	out := &policyv1alpha1.ResourceFilter{}
	if r := f.Resources; r != nil {
		if validGlobs(r.Namespaces) {
			out.Namespaces = slices.Clone(r.Namespaces)
		}
		if validSelector(r.Selector) {
			out.Selector = r.Selector.DeepCopy()
		}
		if validSelector(r.NamespaceSelector) {
			out.NamespaceSelector = r.NamespaceSelector.DeepCopy()
		}
	}
	return out
}

func (f kyvernoFilter) isSet() bool {
	return f.Resources != nil || len(f.Subjects) > 0 || len(f.Roles) > 0 || len(f.ClusterRoles) > 0
}

// mergeFilters ANDs filters (Kyverno's match.all). ok is false when two set
// different namespace lists, which one podsieve filter cannot intersect.
func mergeFilters(fs []*policyv1alpha1.ResourceFilter) (*policyv1alpha1.ResourceFilter, bool) {
	out := &policyv1alpha1.ResourceFilter{}
	ok := true
	for _, f := range fs {
		if len(f.Namespaces) > 0 {
			if len(out.Namespaces) > 0 && !slices.Equal(out.Namespaces, f.Namespaces) {
				ok = false
				continue
			}
			out.Namespaces = f.Namespaces
		}
		out.Selector = andSelectors(out.Selector, f.Selector)
		out.NamespaceSelector = andSelectors(out.NamespaceSelector, f.NamespaceSelector)
	}
	return out, ok
}

func andSelectors(a, b *metav1.LabelSelector) *metav1.LabelSelector {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := a.DeepCopy()
	for k, v := range b.MatchLabels {
		if old, ok := out.MatchLabels[k]; ok && old != v {
			// Both must hold: nothing matches; say so as an In with no
			// common value rather than dropping one.
			out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			continue
		}
		if out.MatchLabels == nil {
			out.MatchLabels = map[string]string{}
		}
		out.MatchLabels[k] = v
	}
	out.MatchExpressions = append(out.MatchExpressions, b.MatchExpressions...)
	return out
}

func isEmpty(f *policyv1alpha1.ResourceFilter) bool {
	return f == nil || (len(f.Namespaces) == 0 && f.Selector == nil && f.NamespaceSelector == nil)
}

func namespacesOnly(f *policyv1alpha1.ResourceFilter) bool {
	return f != nil && len(f.Namespaces) > 0 && f.Selector == nil && f.NamespaceSelector == nil
}

// simplify turns alternatives (OR) into as few filters as mean the same: an
// empty one matches everything; namespace-only ones are one filter with the
// union of their namespaces.
func simplify(alts []*policyv1alpha1.ResourceFilter) []*policyv1alpha1.ResourceFilter {
	var out []*policyv1alpha1.ResourceFilter
	var union *policyv1alpha1.ResourceFilter
	seen := map[string]bool{}
	for _, f := range alts {
		if isEmpty(f) {
			return []*policyv1alpha1.ResourceFilter{nil}
		}
		if namespacesOnly(f) {
			if union == nil {
				union = &policyv1alpha1.ResourceFilter{}
				out = append(out, union)
			}
			for _, ns := range f.Namespaces {
				if !slices.Contains(union.Namespaces, ns) {
					union.Namespaces = append(union.Namespaces, ns)
				}
			}
			continue
		}
		key, _ := json.Marshal(f)
		if seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		out = append(out, f)
	}
	return out
}

// policyMatch translates a rule's match into one filter per alternative. A
// part that cannot be translated is dropped, which widens the rule: the
// converted rule enforces at least where Kyverno's did.
func (c *kyvernoConverter) policyMatch(n *noter, m kyvernoMatch, path string) []*policyv1alpha1.ResourceFilter {
	translate := func(f kyvernoFilter, p string) *policyv1alpha1.ResourceFilter {
		for _, pr := range filterProblems(f, p) {
			n.untranslated(pr[0], "%s; the converted rule applies more widely than Kyverno's", pr[1])
		}
		return toFilter(f)
	}
	var all []*policyv1alpha1.ResourceFilter
	if m.kyvernoFilter.isSet() {
		all = append(all, translate(m.kyvernoFilter, path))
	}
	for i, f := range m.All {
		all = append(all, translate(f, fmt.Sprintf("%s.all[%d]", path, i)))
	}
	allF, ok := mergeFilters(all)
	if !ok {
		n.untranslated(path+".all", "several filters name different namespaces, which one podsieve filter cannot intersect; the first list is kept, so the rule applies more widely")
	}
	if len(m.Any) == 0 {
		return simplify([]*policyv1alpha1.ResourceFilter{allF})
	}
	var alts []*policyv1alpha1.ResourceFilter
	for i, f := range m.Any {
		a := translate(f, fmt.Sprintf("%s.any[%d]", path, i))
		merged, ok := mergeFilters([]*policyv1alpha1.ResourceFilter{a, allF})
		if !ok {
			n.untranslated(fmt.Sprintf("%s.any[%d]", path, i), "names namespaces and so does match.all; the any filter's namespaces are kept")
		}
		alts = append(alts, merged)
	}
	return simplify(alts)
}

// policyExclude translates a rule's exclude into podsieve's one exclude
// filter. A Kyverno filter that cannot be translated whole is left out:
// the converted rule then also applies to what it excluded.
func (c *kyvernoConverter) policyExclude(n *noter, m kyvernoMatch, path string) *policyv1alpha1.ResourceFilter {
	translate := func(f kyvernoFilter, p string) *policyv1alpha1.ResourceFilter {
		problems := filterProblems(f, p)
		if len(problems) > 0 {
			for _, pr := range problems {
				n.untranslated(pr[0], "%s; this exclude filter was left out, so the rule also applies to what it excluded", pr[1])
			}
			return nil
		}
		return toFilter(f)
	}
	var all []*policyv1alpha1.ResourceFilter
	allOK := true
	collect := func(f kyvernoFilter, p string) {
		t := translate(f, p)
		if t == nil {
			allOK = false
			return
		}
		all = append(all, t)
	}
	if m.kyvernoFilter.isSet() {
		collect(m.kyvernoFilter, path)
	}
	for i, f := range m.All {
		collect(f, fmt.Sprintf("%s.all[%d]", path, i))
	}
	if len(m.Any) > 0 && len(all) > 0 {
		n.untranslated(path, "both any and all filters; podsieve's one exclude filter cannot say that; the exclude was left out, so the rule also applies to what it excluded")
		return nil
	}
	if len(m.Any) == 0 {
		if !allOK || len(all) == 0 {
			return nil
		}
		f, ok := mergeFilters(all)
		if !ok {
			n.untranslated(path+".all", "several filters name different namespaces; the exclude was left out, so the rule also applies to what it excluded")
			return nil
		}
		return f
	}
	var alts []*policyv1alpha1.ResourceFilter
	for i, f := range m.Any {
		if t := translate(f, fmt.Sprintf("%s.any[%d]", path, i)); t != nil {
			alts = append(alts, t)
		}
	}
	alts = simplify(alts)
	if len(alts) == 0 {
		return nil
	}
	if alts[0] == nil {
		// An exclude that matches everything: the rule never applies.
		return &policyv1alpha1.ResourceFilter{}
	}
	for i := 1; i < len(alts); i++ {
		b, _ := json.Marshal(alts[i])
		n.untranslated(path+".any", "podsieve's exclude is one filter; the filter %s was left out, so the rule also applies to what it excluded", b)
	}
	return alts[0]
}
