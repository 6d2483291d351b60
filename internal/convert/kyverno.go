package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// KyvernoOptions tune the Kyverno converter.
type KyvernoOptions struct {
	// ExceptionsNamespace is the cluster exceptions namespace: a Kyverno
	// PolicyException whose namespaces are globs, a namespaceSelector or
	// unset (every namespace) becomes an exception there.
	ExceptionsNamespace string
}

// ruleRef is a converted rule: the podsieve policy and rule names.
type ruleRef struct{ policy, rule string }

// kyvernoConverter holds what converting policies learnt, for the exceptions
// that name them.
type kyvernoConverter struct {
	opts KyvernoOptions
	res  *Result
	// rules maps a Kyverno policy's key (name, or namespace/name for a
	// namespaced Policy) and Kyverno rule name to the converted rules.
	rules map[string]map[string][]ruleRef
	// exceptionNames are the names taken per namespace.
	exceptionNames map[string]map[string]bool
	// optIn collects, per converted policy, what the converted exceptions
	// that target it waive: podsieve honours exceptions only for a policy
	// that opts in (spec.exceptions), where Kyverno honours them for all.
	optIn map[string]*optIn
}

// optIn is what the exceptions converted for one policy waive, and where
// they came from, to note the opt-in there.
type optIn struct {
	controls  []policyv1alpha1.ControlName
	wholeRule bool
	noters    []*noter
}

// Kyverno converts ClusterPolicies and Policies with validate.podSecurity
// rules into SecurityPolicies, and PolicyExceptions with podSecurity into
// PolicyExceptions. Documents of other kinds are noted and ignored. The
// error is bad input: a document that does not decode.
func Kyverno(docs []Document, opts KyvernoOptions) (*Result, error) {
	c := &kyvernoConverter{opts: opts, res: &Result{}, rules: map[string]map[string][]ruleRef{}, exceptionNames: map[string]map[string]bool{}}
	var policies []*kyvernoPolicy
	var policyDocs, excDocs []*Document
	var exceptions []*kyvernoException
	var errs []error
	for i := range docs {
		d := &docs[i]
		group, _, _ := strings.Cut(d.APIVersion, "/")
		switch {
		case group == "kyverno.io" && (d.Kind == "ClusterPolicy" || d.Kind == "Policy"):
			p := &kyvernoPolicy{}
			if err := decodeStrict(d, p); err != nil {
				errs = append(errs, err)
				continue
			}
			policies, policyDocs = append(policies, p), append(policyDocs, d)
		case group == "kyverno.io" && d.Kind == "PolicyException":
			e := &kyvernoException{}
			if err := decodeStrict(d, e); err != nil {
				errs = append(errs, err)
				continue
			}
			exceptions, excDocs = append(exceptions, e), append(excDocs, d)
		default:
			newNoter(c.res, d).warn("", "not a kyverno.io ClusterPolicy, Policy or PolicyException; ignored")
		}
	}
	// Policies first, so that exceptions follow renamed and split rules.
	for i, p := range policies {
		if err := c.policy(policyDocs[i], p); err != nil {
			errs = append(errs, atDoc(policyDocs[i].Loc, err))
		}
	}
	for i, e := range exceptions {
		if e.Metadata.Name == "" {
			errs = append(errs, atDoc(excDocs[i].Loc, fmt.Errorf("%s: PolicyException: metadata.name is required", excDocs[i].Where())))
			continue
		}
		c.exception(excDocs[i], e)
	}
	c.optInPolicies()
	c.res.sortNotes()
	return c.res, SortErrors(errs...)
}

func kyvernoKey(kind string, meta metav1.ObjectMeta) string {
	if kind == "Policy" {
		return meta.Namespace + "/" + meta.Name
	}
	return meta.Name
}

// kyvernoAction reads a validationFailureAction or failureAction; Kyverno
// accepts both spellings of each.
func kyvernoAction(s string) (policyv1alpha1.PolicyAction, bool) {
	switch strings.ToLower(s) {
	case "enforce":
		return policyv1alpha1.ActionEnforce, true
	case "audit":
		return policyv1alpha1.ActionAudit, true
	}
	return "", false
}

func (c *kyvernoConverter) policy(d *Document, kp *kyvernoPolicy) error {
	n := newNoter(c.res, d)
	key := kyvernoKey(d.Kind, kp.Metadata)
	name := kp.Metadata.Name
	if name == "" {
		return fmt.Errorf("%s: %s: metadata.name is required", d.Where(), d.Kind)
	}
	if d.Kind == "Policy" {
		ns := kp.Metadata.Namespace
		if ns == "" {
			ns = "default"
			key = ns + "/" + name
			n.warn("metadata.namespace", "unset; taken as %q, where kubectl would create it", ns)
		}
		name = ns + "-" + name
		n.warn("metadata.name", "a namespaced Policy becomes the cluster-scoped SecurityPolicy %q whose rules match namespace %q only", name, ns)
	}

	// Kyverno's default action is Audit; podsieve's is Enforce, so the
	// output always says which.
	action := policyv1alpha1.ActionAudit
	if s := kp.Spec.ValidationFailureAction; s != "" {
		a, ok := kyvernoAction(s)
		if !ok {
			return fmt.Errorf("%s: %s %s: spec.validationFailureAction: %q is not an action; use Enforce or Audit", d.Where(), d.Kind, d.Name, s)
		}
		action = a
	}
	spec := kp.Spec
	if len(spec.ValidationFailureActionOverrides) > 0 {
		n.untranslated("spec.validationFailureActionOverrides", "per-namespace actions have no counterpart; every namespace gets action %s", action)
	}
	if spec.Admission != nil && !*spec.Admission {
		action = policyv1alpha1.ActionAudit
		n.untranslated("spec.admission", "false (background scans only) has no counterpart; the converted policy uses action Audit, which admits and reports")
	}
	if spec.FailurePolicy != nil && strings.EqualFold(*spec.FailurePolicy, "Ignore") {
		n.warn("spec.failurePolicy", "Ignore has no counterpart: podsieve's webhook fails closed")
	}
	if spec.ApplyRules != nil && strings.EqualFold(*spec.ApplyRules, "One") {
		n.untranslated("spec.applyRules", "One has no counterpart: podsieve applies every rule that matches")
	}
	if spec.EmitWarning != nil && *spec.EmitWarning {
		n.warn("spec.emitWarning", "no counterpart; a policy with action Warn returns warnings")
	}
	for field, raw := range map[string]json.RawMessage{
		"spec.webhookTimeoutSeconds": spec.WebhookTimeoutSeconds, "spec.webhookConfiguration": spec.WebhookConfiguration,
		"spec.schemaValidation": spec.SchemaValidation, "spec.mutateExistingOnPolicyUpdate": spec.MutateExistingOnPolicyUpdate,
		"spec.generateExisting": spec.GenerateExisting, "spec.generateExistingOnPolicyUpdate": spec.GenerateExistingOnPolicyUpdate,
		"spec.useServerSideApply": spec.UseServerSideApply,
	} {
		if len(raw) > 0 {
			n.warn(field, "a Kyverno setting with no counterpart; ignored")
		}
	}
	sortFieldNotes(c.res.Notes, n)

	type group struct {
		action policyv1alpha1.PolicyAction
		rules  []policyv1alpha1.PolicyRule
		refs   []struct{ kyverno, rule string }
	}
	var groups []*group
	groupOf := func(a policyv1alpha1.PolicyAction) *group {
		for _, g := range groups {
			if g.action == a {
				return g
			}
		}
		g := &group{action: a}
		groups = append(groups, g)
		return g
	}
	for i := range spec.Rules {
		r := &spec.Rules[i]
		path := fmt.Sprintf("spec.rules[%d]", i)
		if r.Validate == nil || r.Validate.PodSecurity == nil {
			n.untranslated(path, "rule %q does not validate podSecurity; podsieve convert translates only podSecurity rules", r.Name)
			continue
		}
		ruleAction := action
		v := r.Validate
		if v.FailureAction != nil {
			a, ok := kyvernoAction(*v.FailureAction)
			if !ok {
				return fmt.Errorf("%s: %s %s: %s.validate.failureAction: %q is not an action; use Enforce or Audit", d.Where(), d.Kind, d.Name, path, *v.FailureAction)
			}
			ruleAction = a
		}
		if len(v.FailureActionOverrides) > 0 {
			n.untranslated(path+".validate.failureActionOverrides", "per-namespace actions have no counterpart; every namespace gets action %s", ruleAction)
		}
		if len(v.AllowExistingViolations) > 0 {
			n.warn(path+".validate.allowExistingViolations", "no counterpart: podsieve judges an update that changes the pod template as a new object")
		}
		if v.Message != "" {
			n.warn(path+".validate.message", "not used: podsieve's messages name the control, container, field and values")
		}
		for field, raw := range map[string]json.RawMessage{".context": r.Context, ".preconditions": r.Preconditions, ".celPreconditions": r.CELPreconditions} {
			if len(raw) > 0 {
				n.untranslated(path+field, "no counterpart; the converted rule applies whatever the %s say", strings.TrimPrefix(field, "."))
			}
		}
		ps := v.PodSecurity
		level := policyv1alpha1.PodSecurityLevel(strings.ToLower(ps.Level))
		switch level {
		case policyv1alpha1.LevelPrivileged, policyv1alpha1.LevelBaseline, policyv1alpha1.LevelRestricted:
		default:
			return fmt.Errorf("%s: %s %s: %s.validate.podSecurity.level: %q is not a level; use privileged, baseline or restricted", d.Where(), d.Kind, d.Name, path, ps.Level)
		}
		if level == policyv1alpha1.LevelPrivileged {
			// Kyverno runs every check at privileged; podsieve, like Pod
			// Security Admission, runs none (docs/semantics.md). Neither
			// level says what the author meant, so the rule is kept as
			// written and reported.
			n.untranslated(path+".validate.podSecurity.level", "level privileged runs every check in Kyverno and none in podsieve: the converted rule checks nothing and admits every pod; set the level the rule should enforce (baseline or restricted)")
		}
		version := ps.Version
		if version == "" {
			version = policyv1alpha1.VersionLatest
		}
		podSecurity := policyv1alpha1.PodSecurity{Level: level, Version: version}
		for j, e := range ps.Exclude {
			x, ok := convertEntry(n, e, fmt.Sprintf("%s.validate.podSecurity.exclude[%d]", path, j), "this exclusion was left out, so the rule refuses what it excluded")
			if !ok {
				continue
			}
			podSecurity.Exclude = append(podSecurity.Exclude, x)
		}
		matches := c.policyMatch(n, r.Match, path+".match")
		var exclude *policyv1alpha1.ResourceFilter
		if r.Exclude != nil {
			exclude = c.policyExclude(n, *r.Exclude, path+".exclude")
		}
		if d.Kind == "Policy" {
			ns := kp.Metadata.Namespace
			if ns == "" {
				ns = "default"
			}
			for j := range matches {
				if matches[j] == nil {
					matches[j] = &policyv1alpha1.ResourceFilter{}
				}
				if len(matches[j].Namespaces) > 0 && !slices.ContainsFunc(matches[j].Namespaces, func(g string) bool { return globMatch(g, ns) }) {
					n.warn(path+".match", "names namespaces other than the Policy's own %q, where a namespaced Policy never applies; the converted rule matches %q", ns, ns)
				}
				matches[j].Namespaces = []string{ns}
			}
		}
		base := ruleName(r.Name)
		if base != r.Name {
			n.warn(path+".name", "%q is not a valid podsieve rule name; the rule is named %q", r.Name, base)
		}
		g := groupOf(ruleAction)
		for j, m := range matches {
			rn := base
			if len(matches) > 1 {
				rn = ruleName(fmt.Sprintf("%s-%d", strings.TrimSuffix(base[:min(len(base), 60)], "-"), j+1))
			}
			for k := 2; slices.ContainsFunc(g.rules, func(pr policyv1alpha1.PolicyRule) bool { return pr.Name == rn }); k++ {
				rn = ruleName(fmt.Sprintf("%s-%d", base[:min(len(base), 60)], k))
			}
			pr := policyv1alpha1.PolicyRule{Name: rn, Match: m, PodSecurity: podSecurity}
			if exclude != nil {
				ex := *exclude
				pr.Exclude = &ex
			}
			g.rules = append(g.rules, pr)
			g.refs = append(g.refs, struct{ kyverno, rule string }{r.Name, rn})
		}
		if len(matches) > 1 {
			n.warn(path+".match.any", "podsieve's match is one filter; the rule is split into one rule per filter (%d rules)", len(matches))
		}
	}
	if len(groups) == 0 {
		n.untranslated("spec.rules", "no podSecurity rule; no SecurityPolicy is written")
		return nil
	}
	if len(groups) > 1 {
		n.warn("spec.rules", "rules with different failure actions; podsieve's action is per policy, so the policy is split by action")
	}
	// The group with the policy's own action keeps the name.
	slices.SortStableFunc(groups, func(a, b *group) int {
		if a.action == action && b.action != action {
			return -1
		}
		if b.action == action && a.action != action {
			return 1
		}
		return 0
	})
	c.rules[key] = map[string][]ruleRef{}
	for i, g := range groups {
		pname := name
		if i > 0 {
			pname = name + "-" + strings.ToLower(string(g.action))
		}
		sp := newPolicy(pname)
		sp.Spec.Action = g.action
		sp.Spec.Background = kp.Spec.Background
		sp.Spec.Rules = g.rules
		if _, err := engine.CompilePolicy(sp); err != nil {
			return fmt.Errorf("%s: %s %s: the converted SecurityPolicy %s does not compile: %w", d.Where(), d.Kind, d.Name, pname, err)
		}
		c.res.Objects = append(c.res.Objects, Output{From: fmt.Sprintf("%s (%s %s)", d.Where(), d.Kind, d.Name), Object: sp})
		for _, ref := range g.refs {
			c.rules[key][ref.kyverno] = append(c.rules[key][ref.kyverno], ruleRef{pname, ref.rule})
		}
	}
	return nil
}

// sortFieldNotes orders the notes of one object that were added from a map
// by field, so that output is stable.
func sortFieldNotes(notes []Note, n *noter) {
	start := len(notes)
	for start > 0 && notes[start-1].Where == n.where && notes[start-1].Object == n.object {
		start--
	}
	slices.SortStableFunc(notes[start:], func(a, b Note) int { return strings.Compare(a.Field, b.Field) })
}

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

// appArmorAnnotationField is podsieve's field for the AppArmor annotations;
// Kyverno calls it metadata.annotations.
const appArmorAnnotationField = `metadata.annotations["container.apparmor.security.beta.kubernetes.io/*"]`

// convertEntry translates one Kyverno podSecurity exclusion; ok is false,
// with the reason noted and what leaving it out means (consequence), when it
// cannot be.
func convertEntry(n *noter, e kyvernoEntry, path, consequence string) (policyv1alpha1.PodSecurityExclusion, bool) {
	x := policyv1alpha1.PodSecurityExclusion{
		ControlName: policyv1alpha1.ControlName(e.ControlName),
		Images:      slices.Clone(e.Images),
		Values:      slices.Clone(e.Values),
	}
	control := policyv1alpha1.ControlName(e.ControlName)
	if !slices.Contains(policyv1alpha1.Controls, control) {
		n.untranslated(path+".controlName", "%q is not a Pod Security Standards control; %s", control, consequence)
		return x, false
	}
	field := e.RestrictedField
	switch {
	case field == "":
	case control == policyv1alpha1.ControlAppArmor && field == "metadata.annotations":
		field = appArmorAnnotationField
	case control == policyv1alpha1.ControlVolumeTypes && field == "spec.volumes[*]":
		if len(e.Values) > 0 {
			n.untranslated(path+".restrictedField", "podsieve names each volume type's field (spec.volumes[*].nfs, ...) and lists volume names as values; write one entry per volume type; %s", consequence)
			return x, false
		}
		field = "" // every field of the control
	case strings.HasPrefix(field, "spec.ephemeralContainers[*].seLinuxOptions."):
		// Kyverno spells these without securityContext.
		field = strings.Replace(field, "[*].seLinuxOptions.", "[*].securityContext.seLinuxOptions.", 1)
	}
	x.RestrictedField = field
	for _, img := range e.Images {
		if i := strings.Index(img, "*"); i >= 0 && !strings.Contains(img, "**") && (strings.Contains(img[i:], "/") || strings.HasSuffix(img, "/*")) {
			n.warn(path+".images", "%q: podsieve's * stays within one path segment (Kyverno's also crosses /); write ** where deeper paths are meant", img)
		}
	}
	if _, err := engine.CompileExclusion(x, engine.Source{}, path); err != nil {
		// The engine's message starts with the field it is about.
		field, msg := path, err.Error()
		if f, m, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(f, path) {
			field, msg = f, m
		}
		n.untranslated(field, "%s; %s", msg, consequence)
		return x, false
	}
	return x, true
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
	for i, e := range ke.Spec.PodSecurity {
		x, ok := convertEntry(n, e, fmt.Sprintf("spec.podSecurity[%d]", i), "this entry was left out, so the exception waives less")
		if !ok {
			continue
		}
		entries = append(entries, x)
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

func (c *kyvernoConverter) targets(n *noter, t kyvernoExcTarget, path string) []policyv1alpha1.ExceptionTarget {
	rules, known := c.rules[t.PolicyName]
	if !known {
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

func (c *kyvernoConverter) placements(n *noter, f kyvernoFilter, path string) []placement {
	var problems [][2]string
	if len(f.Subjects) > 0 || len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
		problems = append(problems, [2]string{path, "subjects, roles and clusterRoles have no counterpart"})
	}
	r := f.Resources
	if r == nil {
		r = &kyvernoResources{}
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
	names := slices.Clone(r.Names)
	if r.Name != "" {
		names = append(names, r.Name)
	}
	if !validGlobs(names) {
		problems = append(problems, [2]string{path + ".resources.names", "not a podsieve glob (only *, ** and ? are special)"})
	}
	if !validGlobs(r.Namespaces) {
		problems = append(problems, [2]string{path + ".resources.namespaces", "not a podsieve glob (only *, ** and ? are special)"})
	}
	if len(problems) > 0 {
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
