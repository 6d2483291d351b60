package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// The rules of a Kyverno ClusterPolicy or Policy: each validate.podSecurity
// rule becomes one podsieve rule per match alternative, grouped by failure
// action into one SecurityPolicy per action.

// ruleGroup is the converted rules that share a failure action, and the
// Kyverno rule each comes from.
type ruleGroup struct {
	action policyv1alpha1.PolicyAction
	rules  []policyv1alpha1.PolicyRule
	refs   []struct{ kyverno, rule string }
}

func (p *kyvernoPolicyConversion) groupOf(a policyv1alpha1.PolicyAction) *ruleGroup {
	for _, g := range p.groups {
		if g.action == a {
			return g
		}
	}
	g := &ruleGroup{action: a}
	p.groups = append(p.groups, g)
	return g
}

// rules converts every rule, in order.
func (p *kyvernoPolicyConversion) rules() error {
	for i := range p.kp.Spec.Rules {
		if err := p.rule(&p.kp.Spec.Rules[i], fmt.Sprintf("spec.rules[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// rule converts one rule at path: its action, its podSecurity, its filters,
// and the podsieve rules they make.
func (p *kyvernoPolicyConversion) rule(r *kyvernoRule, path string) error {
	n := p.n
	if r.Validate == nil || r.Validate.PodSecurity == nil {
		n.untranslated(path, "rule %q does not validate podSecurity; podsieve convert translates only podSecurity rules", r.Name)
		return nil
	}
	action, err := p.ruleAction(r, path)
	if err != nil {
		return err
	}
	podSecurity, err := p.podSecurity(r.Validate.PodSecurity, path)
	if err != nil {
		return err
	}
	matches, exclude := p.filters(r, path)
	p.addRules(r, path, action, podSecurity, matches, exclude)
	return nil
}

// ruleAction reads the rule's failure action (the policy's by default) and
// notes the validate settings that have no counterpart.
func (p *kyvernoPolicyConversion) ruleAction(r *kyvernoRule, path string) (policyv1alpha1.PolicyAction, error) {
	d, n := p.d, p.n
	ruleAction := p.action
	v := r.Validate
	if v.FailureAction != nil {
		a, ok := kyvernoAction(*v.FailureAction)
		if !ok {
			return "", fmt.Errorf("%s: %s %s: %s.validate.failureAction: %q is not an action; use Enforce or Audit", d.Where(), d.Kind, d.Name, path, *v.FailureAction)
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
	// In the order Kyverno's rule declares them, so that the notes come out
	// the same on every run.
	for _, f := range []struct {
		field string
		raw   json.RawMessage
	}{{".context", r.Context}, {".preconditions", r.Preconditions}, {".celPreconditions", r.CELPreconditions}} {
		if len(f.raw) > 0 {
			n.untranslated(path+f.field, "no counterpart; the converted rule applies whatever the %s say", strings.TrimPrefix(f.field, "."))
		}
	}
	return ruleAction, nil
}

// podSecurity converts validate.podSecurity: the level, the version and the
// exclusions that can be translated.
func (p *kyvernoPolicyConversion) podSecurity(ps *kyvernoPodSecurity, path string) (policyv1alpha1.PodSecurity, error) {
	d, n := p.d, p.n
	level := policyv1alpha1.PodSecurityLevel(strings.ToLower(ps.Level))
	switch level {
	case policyv1alpha1.LevelPrivileged, policyv1alpha1.LevelBaseline, policyv1alpha1.LevelRestricted:
	default:
		return policyv1alpha1.PodSecurity{}, fmt.Errorf("%s: %s %s: %s.validate.podSecurity.level: %q is not a level; use privileged, baseline or restricted", d.Where(), d.Kind, d.Name, path, ps.Level)
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
		x, outcome := convertEntry(n, e, fmt.Sprintf("%s.validate.podSecurity.exclude[%d]", path, j), "this exclusion was left out, so the rule refuses what it excluded")
		if outcome == entryTranslated {
			podSecurity.Exclude = append(podSecurity.Exclude, x)
		}
	}
	return podSecurity, nil
}

// filters translates the rule's match, one filter per alternative, and its
// exclude (kyverno_filters.go); a namespaced Policy's rules match its own
// namespace only.
func (p *kyvernoPolicyConversion) filters(r *kyvernoRule, path string) ([]*policyv1alpha1.ResourceFilter, *policyv1alpha1.ResourceFilter) {
	n := p.n
	matches := p.c.policyMatch(n, r.Match, path+".match")
	var exclude *policyv1alpha1.ResourceFilter
	if r.Exclude != nil {
		exclude = p.c.policyExclude(n, *r.Exclude, path+".exclude")
	}
	if ns := p.namespace; ns != "" {
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
	return matches, exclude
}

// addRules adds one podsieve rule per match alternative to the group of the
// rule's action, named after the Kyverno rule and unique in the group.
func (p *kyvernoPolicyConversion) addRules(r *kyvernoRule, path string, action policyv1alpha1.PolicyAction, podSecurity policyv1alpha1.PodSecurity,
	matches []*policyv1alpha1.ResourceFilter, exclude *policyv1alpha1.ResourceFilter) {
	n := p.n
	base := ruleName(r.Name)
	if base != r.Name {
		n.warn(path+".name", "%q is not a valid podsieve rule name; the rule is named %q", r.Name, base)
	}
	g := p.groupOf(action)
	for j, m := range matches {
		rn := base
		if len(matches) > 1 {
			rn = ruleName(fmt.Sprintf("%s-%d", strings.TrimSuffix(base[:min(len(base), 60)], "-"), j+1))
		}
		for k := 2; slices.ContainsFunc(g.rules, func(pr policyv1alpha1.PolicyRule) bool { return pr.Name == rn }); k++ {
			rn = ruleName(fmt.Sprintf("%s-%d", base[:min(len(base), 60)], k))
		}
		pr := policyv1alpha1.PolicyRule{Name: rn, Match: m, PodSecurity: podSecurity}
		pr.Severity, pr.Category = p.reporting()
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

// output writes one SecurityPolicy per group, the one with the policy's own
// action under the policy's name, and records where each Kyverno rule went
// for the exceptions that name it.
func (p *kyvernoPolicyConversion) output() error {
	d, n, c := p.d, p.n, p.c
	groups := p.groups
	if len(groups) == 0 {
		n.untranslated("spec.rules", "no podSecurity rule; no SecurityPolicy is written")
		return nil
	}
	if len(groups) > 1 {
		n.warn("spec.rules", "rules with different failure actions; podsieve's action is per policy, so the policy is split by action")
	}
	// The group with the policy's own action keeps the name.
	slices.SortStableFunc(groups, func(a, b *ruleGroup) int {
		if a.action == p.action && b.action != p.action {
			return -1
		}
		if b.action == p.action && a.action != p.action {
			return 1
		}
		return 0
	})
	c.rules[p.key] = map[string][]ruleRef{}
	for i, g := range groups {
		pname := p.name
		if i > 0 {
			pname = p.name + "-" + strings.ToLower(string(g.action))
		}
		sp := newPolicy(pname)
		sp.Spec.Action = g.action
		sp.Spec.Background = p.kp.Spec.Background
		sp.Spec.Rules = g.rules
		if _, err := engine.CompilePolicy(sp); err != nil {
			return fmt.Errorf("%s: %s %s: the converted SecurityPolicy %s does not compile: %w", d.Where(), d.Kind, d.Name, pname, err)
		}
		c.res.Objects = append(c.res.Objects, Output{From: fmt.Sprintf("%s (%s %s)", d.Where(), d.Kind, d.Name), Object: sp})
		for _, ref := range g.refs {
			c.rules[p.key][ref.kyverno] = append(c.rules[p.key][ref.kyverno], ruleRef{pname, ref.rule})
		}
	}
	return nil
}

// Kyverno's annotations for the severity and category of a policy's report
// results (Policy Reporter groups by them).
const (
	kyvernoSeverityAnnotation = "policies.kyverno.io/severity"
	kyvernoCategoryAnnotation = "policies.kyverno.io/category"
)

// reporting is the severity and category a converted rule reports with:
// the Kyverno policy's annotations, where podsieve can carry them, so that
// the reports keep grouping as they did. One it cannot carry is left to
// podsieve's default, with a warning. Read once per policy.
func (p *kyvernoPolicyConversion) reporting() (*policyv1alpha1.Severity, *string) {
	if p.reportRead {
		return p.severity, p.category
	}
	p.reportRead = true
	p.severity, p.category = p.readReporting()
	return p.severity, p.category
}

func (p *kyvernoPolicyConversion) readReporting() (*policyv1alpha1.Severity, *string) {
	annotations := p.kp.Metadata.Annotations
	var severity *policyv1alpha1.Severity
	if v, ok := annotations[kyvernoSeverityAnnotation]; ok {
		s := policyv1alpha1.Severity(strings.ToLower(strings.TrimSpace(v)))
		path := "metadata.annotations[" + kyvernoSeverityAnnotation + "]"
		if err := engine.ValidateReporting(s, "", path); err != nil {
			p.n.warn(path, "%v; the rules report podsieve's default severity", err)
		} else {
			severity = &s
		}
	}
	var category *string
	if v, ok := annotations[kyvernoCategoryAnnotation]; ok {
		c := strings.TrimSpace(v)
		path := "metadata.annotations[" + kyvernoCategoryAnnotation + "]"
		if err := engine.ValidateReporting("", c, path); err != nil {
			p.n.warn(path, "%v; the rules report podsieve's default category", err)
		} else {
			category = &c
		}
	}
	return severity, category
}
