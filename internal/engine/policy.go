package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/pod-security-admission/api"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// GeneratedName stands, offline (podsieve eval, exception generate), for
// the part of a name the API server generates after metadata.generateName.
// Its angle brackets are in no real name, so match.names globs that need
// the generated characters (app-ab*) do not match it, and a decision is
// never more lenient than the one the named object will get; globs on the
// prefix (app-*) match it as they match every generated name.
const GeneratedName = "<generated>"

// NamePrefix returns the generateName prefix of an object named offline
// by GeneratedName, and whether it was.
func (o *Object) NamePrefix() (string, bool) { return strings.CutSuffix(o.Name, GeneratedName) }

// Object is a pod-bearing object as the engine sees it: its identity, the
// labels that selectors match (a controller's pod template labels) and the pod
// metadata and spec to evaluate.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	// Labels are what selectors match: the pod's labels, or a controller's pod
	// template labels.
	Labels map[string]string
	Meta   *metav1.ObjectMeta
	Spec   *corev1.PodSpec
	// FieldPrefix is the path from the object to its pod spec's parent
	// ("" for a Pod, "spec.template." for a Deployment), for messages.
	FieldPrefix string
	// RequestUser is the user whose request is being admitted; "" outside
	// admission (the background scan, podsieve eval), where a rule's
	// exclude.usernames exempts nothing.
	RequestUser string
}

// Policy is a compiled SecurityPolicy.
type Policy struct {
	Name string
	// UID and Generation identify the object and spec compiled: a policy
	// deleted and created again restarts at generation 1 with a new UID.
	UID        string
	Generation int64
	Action     policyv1alpha1.PolicyAction
	Background bool
	Rules      []*Rule
	// guardrails is spec.exceptions; nil when the policy has not opted in to
	// PolicyExceptions, and then it honours none.
	guardrails *policyv1alpha1.ExceptionGuardrails
	// limits are spec.exceptions.controls, compiled, by control.
	limits map[policyv1alpha1.ControlName]*controlLimit
	// Strict lists the parts of a stored spec that did not compile and were
	// read at their strictest instead (CompileStoredPolicy); nil when the
	// policy compiled as written.
	Strict []StrictReading
}

// Rule is a compiled rule: its filters, its checks at its level and version,
// and its own exclusions.
type Rule struct {
	Policy     *Policy
	Name       string
	Level      api.Level
	Version    string
	match      *filter
	exclude    *filter
	checks     *checkSet
	exclusions []Exclusion
	groups     entryGroups // exclusions by control
	// reporting is the rule's severity and category as written, and
	// controls its controlSeverities by control (severity.go).
	reporting reporting
	controls  map[policyv1alpha1.ControlName]reporting
}

// CompilePolicy compiles a SecurityPolicy as written. The error names the
// field and what to change. It judges what is written now (the validating
// webhook, podsieve eval and convert): a policy stored already is read with
// CompileStoredPolicy, which never leaves it unenforced for a part that an
// earlier podsieve accepted.
func CompilePolicy(sp *policyv1alpha1.SecurityPolicy) (*Policy, error) {
	return compilePolicy(sp, nil)
}

// compilePolicy compiles sp. With st nil, a part that does not compile
// fails the policy; otherwise st reads it at its strictest and notes it
// (CompileStoredPolicy). Both go through the same checks, so that the two
// never differ on a policy that compiles as written.
func compilePolicy(sp *policyv1alpha1.SecurityPolicy, st *strictReader) (*Policy, error) {
	p := &Policy{
		Name:       sp.Name,
		UID:        string(sp.UID),
		Generation: sp.Generation,
		Action:     sp.Spec.Action,
		Background: sp.Spec.Background == nil || *sp.Spec.Background,
	}
	if p.Action == "" {
		p.Action = policyv1alpha1.ActionEnforce
	}
	switch p.Action {
	case policyv1alpha1.ActionEnforce, policyv1alpha1.ActionAudit, policyv1alpha1.ActionWarn:
	default:
		err := fmt.Errorf("spec.action: %q is not an action; use Enforce, Audit or Warn", p.Action)
		if err := st.read(err, "spec.action", "the policy refuses what it does not admit (Enforce)"); err != nil {
			return nil, err
		}
		p.Action = policyv1alpha1.ActionEnforce
	}
	if sp.Spec.Exceptions != nil {
		p.guardrails = sp.Spec.Exceptions.DeepCopy()
		limits, err := compileControlLimits(p.guardrails)
		if err != nil {
			if st == nil {
				return nil, err
			}
			p.guardrails, limits = st.guardrails(p.guardrails)
		}
		p.limits = limits
	}
	if len(sp.Spec.Rules) == 0 {
		err := fmt.Errorf("spec.rules: a policy needs at least one rule")
		if !st.collecting() {
			return nil, err
		}
		st.note(err, "spec.rules")
	}
	seen := map[string]bool{}
	for i := range sp.Spec.Rules {
		r, err := compileRule(p, &sp.Spec.Rules[i], fmt.Sprintf("spec.rules[%d]", i), st)
		if err != nil {
			return nil, err
		}
		// A rule without a name compiles only to find its other errors
		// (ValidatePolicy); its name is no second use.
		if r.Name != "" && seen[r.Name] {
			err := fmt.Errorf("spec.rules[%d].name: rule name %q is used twice; rule names must be unique", i, r.Name)
			if !st.collecting() {
				return nil, err
			}
			st.note(err, fmt.Sprintf("spec.rules[%d].name", i))
		}
		seen[r.Name] = true
		p.Rules = append(p.Rules, r)
	}
	if st != nil {
		p.Strict = st.readings
	}
	return p, nil
}

func compileRule(p *Policy, pr *policyv1alpha1.PolicyRule, path string, st *strictReader) (*Rule, error) {
	if pr.Name == "" {
		err := fmt.Errorf("%s.name: a rule needs a name", path)
		if !st.collecting() {
			return nil, err
		}
		st.note(err, path+".name")
	}
	r := &Rule{Policy: p, Name: pr.Name}
	lv, err := parseLevelVersion(pr.PodSecurity, path+".podSecurity")
	if err != nil {
		if st == nil {
			return nil, err
		}
		lv = st.levelVersion(pr.PodSecurity, path+".podSecurity")
	}
	r.Level, r.Version = lv.Level, pr.PodSecurity.Version
	if r.Version == "" || lv.Version.Latest() {
		r.Version = policyv1alpha1.VersionLatest
	}
	r.checks = defaultRegistry().set(lv)
	if r.match, err = compileFilter(pr.Match, path+".match"); err != nil {
		if st == nil {
			return nil, err
		}
		r.match = st.match(pr.Match, path+".match")
	}
	if pr.Match != nil && (pr.Match.RuntimeClassNames != nil || pr.Match.Usernames != nil) {
		err := fmt.Errorf("%s.match: runtimeClassNames and usernames exempt: write them in exclude, not match", path)
		if err := st.read(err, path+".match", "the rule applies whatever the object's runtime class or requester"); err != nil {
			return nil, err
		}
		r.match.runtimeClasses, r.match.usernames = nil, nil
	}
	if r.exclude, err = compileFilter(pr.Exclude, path+".exclude"); err != nil {
		if err := st.read(err, path+".exclude", "the exclude removes no object from the rule"); err != nil {
			return nil, err
		}
		r.exclude = nil
	}
	if r.exclusions, err = compileRuleEntries(pr, PolicyRuleSource(p.Name, pr.Name), path, st); err != nil {
		return nil, err
	}
	r.groups = groupEntries(r.exclusions)
	if r.reporting, r.controls, err = compileReporting(pr, path); err != nil {
		// Severity and category change what is reported, never what is
		// admitted: read strictly, they are the defaults.
		if err := st.read(err, path, "the rule's results have the default severity and category"); err != nil {
			return nil, err
		}
		r.reporting, r.controls = reporting{}, nil
	}
	return r, nil
}

// compileRuleEntries compiles the rule's podSecurity.exclude entries.
func compileRuleEntries(pr *policyv1alpha1.PolicyRule, source Source, path string, st *strictReader) ([]Exclusion, error) {
	entries := pr.PodSecurity.Exclude
	if n := len(entries); n > MaxRuleEntries {
		err := fmt.Errorf("%s.podSecurity.exclude: %d entries; a rule may have at most %d (the schema's limit): merge entries that differ only in images or values", path, n, MaxRuleEntries)
		if err := st.read(err, path+".podSecurity.exclude", fmt.Sprintf("the entries after the first %d waive nothing", MaxRuleEntries)); err != nil {
			return nil, err
		}
		entries = entries[:MaxRuleEntries]
	}
	var out []Exclusion
	for i, e := range entries {
		entryPath := fmt.Sprintf("%s.podSecurity.exclude[%d]", path, i)
		x, err := CompileExclusion(e, source, entryPath)
		if err != nil {
			// An entry only ever waives: read strictly, one that does not
			// compile waives nothing.
			if err := st.read(err, entryPath, "the entry waives nothing"); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, x)
	}
	return out, nil
}

func parseLevelVersion(ps policyv1alpha1.PodSecurity, path string) (api.LevelVersion, error) {
	level, err := api.ParseLevel(string(ps.Level))
	if err != nil {
		return api.LevelVersion{}, fmt.Errorf("%s.level: %q is not a level; use privileged, baseline or restricted", path, ps.Level)
	}
	v := ps.Version
	if v == "" {
		v = policyv1alpha1.VersionLatest
	}
	version, err := api.ParseVersion(v)
	if err != nil || (!version.Latest() && version.Major() != 1) {
		return api.LevelVersion{}, fmt.Errorf("%s.version: %q is not a version; use \"latest\" or \"v1.N\", for example \"v1.30\"", path, v)
	}
	return api.LevelVersion{Level: level, Version: version}, nil
}

// Matches reports whether the rule applies to an object whose Namespace has
// nsLabels.
func (r *Rule) Matches(o *Object, nsLabels map[string]string) bool {
	return (r.match == nil || r.match.matches(o, nsLabels)) && (r.exclude == nil || !r.exclude.matches(o, nsLabels))
}

// MayMatchNamespace reports whether some rule of the policy may apply to an
// object in the namespace: its match's namespace globs and namespace
// selector allow it. It errs towards true (object selectors and excludes are
// not considered), for callers that must not miss a namespace, such as the
// background scan deciding what a policy change affects.
func (p *Policy) MayMatchNamespace(namespace string, nsLabels map[string]string) bool {
	for _, r := range p.Rules {
		f := r.match
		if f == nil ||
			((len(f.namespaces) == 0 || f.namespaces.Match(namespace)) &&
				(f.nsSelector == nil || f.nsSelector.Matches(labels.Set(nsLabels)))) {
			return true
		}
	}
	return false
}

// LevelVersion is the rule's level and version as written ("baseline", "latest").
func (r *Rule) LevelVersion() string { return string(r.Level) + ":" + r.Version }

// filter is a compiled ResourceFilter or ExceptionMatch. Every part that is
// set must match.
type filter struct {
	namespaces Globs
	nsSelector labels.Selector
	selector   labels.Selector
	// runtimeClasses and usernames exempt (a rule's exclude only): when
	// either is set, the filter also needs the object's runtimeClassName in
	// the one or the requester in the other.
	runtimeClasses, usernames []string
	names                     Globs
	kinds                     []string
	// selectorSteps bounds what matching its selectors costs a decision:
	// stepsPerRequirement for each requirement, one for each value.
	selectorSteps int64
}

// stepsPerRequirement is what a label selector's requirement costs to
// match besides its values, in steps: about 19 ns for one of one value that
// passes. Each value costs 2 steps and one per 8 bytes: a label is compared
// with each value in turn.
const stepsPerRequirement = 30

// selectorSteps is what matching s can cost, in steps.
func selectorSteps(s *metav1.LabelSelector) int64 {
	if s == nil {
		return 0
	}
	var n int64
	for _, v := range s.MatchLabels {
		n += stepsPerRequirement + 2 + int64(len(v)/8)
	}
	for _, e := range s.MatchExpressions {
		n += stepsPerRequirement
		for _, v := range e.Values {
			n += 2 + int64(len(v)/8)
		}
	}
	return n
}

// Limits on what one PolicyException may hold, which the schema enforces
// too; the engine enforces them for exceptions read from files.
const (
	// MaxExceptionEntries bounds spec.podSecurity.
	MaxExceptionEntries = 16
	// MaxExceptionImages, MaxExceptionContainerNames and
	// MaxExceptionValues bound the image globs, container name globs and
	// values of all of spec.podSecurity's entries together (the schema's
	// rules on PolicyException.spec.podSecurity).
	MaxExceptionImages         = 16
	MaxExceptionContainerNames = 32
	MaxExceptionValues         = 64
	// MaxEntryContainerNames, MaxEntryImages and MaxEntryValues bound one
	// entry's containerNames, images and values (the schema's maxItems).
	MaxEntryContainerNames = 8
	MaxEntryImages         = 8
	MaxEntryValues         = 16
	// MaxRuleEntries bounds a rule's podSecurity.exclude.
	MaxRuleEntries = 64
	// MaxSelectorRequirements bounds a PolicyException's match.selector
	// and match.namespaceSelector: matchLabels and matchExpressions
	// together. Real selectors name a few labels.
	MaxSelectorRequirements = 16
	// MaxSelectorValues bounds the values of one matchExpressions entry.
	MaxSelectorValues = 64
)

// checkSelectorSize refuses a selector larger than a PolicyException may
// hold: matching one is work every decision the exception is offered to
// does.
func checkSelectorSize(s *metav1.LabelSelector, path string) error {
	if s == nil {
		return nil
	}
	if n := len(s.MatchLabels) + len(s.MatchExpressions); n > MaxSelectorRequirements {
		return fmt.Errorf("%s: %d requirements (matchLabels and matchExpressions together); a PolicyException's selector may have at most %d: select by fewer labels", path, n, MaxSelectorRequirements)
	}
	for i, e := range s.MatchExpressions {
		if len(e.Values) > MaxSelectorValues {
			return fmt.Errorf("%s.matchExpressions[%d].values: %d values; at most %d: use a label that the objects share instead", path, i, len(e.Values), MaxSelectorValues)
		}
	}
	return nil
}

func compileFilter(f *policyv1alpha1.ResourceFilter, path string) (*filter, error) {
	if f == nil {
		return nil, nil
	}
	out := &filter{}
	if f.Namespaces != nil && len(f.Namespaces) == 0 {
		return nil, fmt.Errorf("%s.namespaces: an empty list would match no namespace; remove the field to mean any namespace", path)
	}
	var err error
	if out.namespaces, err = CompileGlobs(f.Namespaces); err != nil {
		return nil, fmt.Errorf("%s.namespaces%w", path, err)
	}
	if out.nsSelector, err = compileSelector(f.NamespaceSelector, path+".namespaceSelector"); err != nil {
		return nil, err
	}
	if out.selector, err = compileSelector(f.Selector, path+".selector"); err != nil {
		return nil, err
	}
	out.selectorSteps = selectorSteps(f.NamespaceSelector) + selectorSteps(f.Selector)
	for _, l := range []struct {
		name string
		list []string
	}{{"runtimeClassNames", f.RuntimeClassNames}, {"usernames", f.Usernames}} {
		if l.list != nil && len(l.list) == 0 {
			return nil, fmt.Errorf("%s.%s: an empty list would exempt nothing; remove the field", path, l.name)
		}
	}
	out.runtimeClasses, out.usernames = slices.Clone(f.RuntimeClassNames), slices.Clone(f.Usernames)
	return out, nil
}

func compileSelector(s *metav1.LabelSelector, path string) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sel, nil
}

func (f *filter) matches(o *Object, nsLabels map[string]string) bool {
	return f.mismatch(o, nsLabels) == filterMatches
}

// filterPart names the part of a filter that does not select an object.
type filterPart uint8

const (
	filterMatches filterPart = iota
	filterNamespaces
	filterNamespaceSelector
	filterSelector
	filterNames
	filterKinds
	filterExemptions
)

// mismatch is the first part of the filter that does not select the object,
// or filterMatches. It is the one test behind matches (the decision) and
// whyNot (its explanation).
func (f *filter) mismatch(o *Object, nsLabels map[string]string) filterPart {
	switch {
	case len(f.namespaces) > 0 && !f.namespaces.Match(o.Namespace):
		return filterNamespaces
	case f.nsSelector != nil && !f.nsSelector.Matches(labels.Set(nsLabels)):
		return filterNamespaceSelector
	case f.selector != nil && !f.selector.Matches(labels.Set(o.Labels)):
		return filterSelector
	case len(f.names) > 0 && !f.names.Match(o.Name):
		return filterNames
	case len(f.kinds) > 0 && !slices.Contains(f.kinds, o.Kind):
		return filterKinds
	case (len(f.runtimeClasses) > 0 || len(f.usernames) > 0) && !f.exempts(o):
		return filterExemptions
	}
	return filterMatches
}

// Permits checks an exception against the policy's guardrails; the error is
// what the exception's NotPermitted condition and the CLI say. now stands in
// for the creation time of an exception that has none yet.
//
// A policy honours exceptions only when it opted in with spec.exceptions.
// What an exception's entries may waive (allowedControls and the per-control
// limits) does not depend on the time, so it is judged once per compiled
// policy and remembered in the exception.
func (p *Policy) Permits(e *Exception, now time.Time) error {
	g := p.guardrails
	if g == nil {
		return fmt.Errorf("policy %q honours no PolicyExceptions: it has no spec.exceptions; "+
			"a cluster admin opts it in by setting spec.exceptions, for example spec.exceptions.allowedControls: [\"Capabilities\"]", p.Name)
	}
	if g.Allow != nil && !*g.Allow {
		return fmt.Errorf("policy %q allows no exceptions (spec.exceptions.allow is false)", p.Name)
	}
	if g.ClusterExceptionsOnly != nil && *g.ClusterExceptionsOnly && e.Namespace != e.clusterNS {
		return fmt.Errorf("policy %q honours only PolicyExceptions in the cluster exceptions namespace %q (spec.exceptions.clusterExceptionsOnly), "+
			"not in %q: a cluster admin creates it there, with match.namespaces: [%q]", p.Name, e.clusterNS, e.Namespace, e.Namespace)
	}
	if err := e.permittedEntries(p); err != nil {
		return err
	}
	if g.RequireJustification != nil && *g.RequireJustification && strings.TrimSpace(e.justification) == "" {
		return fmt.Errorf("policy %q requires a justification: set spec.justification", p.Name)
	}
	if g.MaxDuration != nil {
		created := e.created
		if created.IsZero() {
			created = now
		}
		limit := created.Add(g.MaxDuration.Duration)
		if e.ExpiresAt == nil {
			return fmt.Errorf("policy %q requires exceptions to expire within %s: set spec.expiresAt no later than %s",
				p.Name, g.MaxDuration.Duration, limit.UTC().Format(time.RFC3339))
		}
		if e.ExpiresAt.After(limit) {
			return fmt.Errorf("policy %q requires exceptions to expire within %s of creation: set spec.expiresAt no later than %s",
				p.Name, g.MaxDuration.Duration, limit.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

func (p *Policy) allowedControls() string {
	if len(p.guardrails.AllowedControls) == 0 {
		return "(none)"
	}
	allowed := make([]string, len(p.guardrails.AllowedControls))
	for i, c := range p.guardrails.AllowedControls {
		allowed[i] = string(c)
	}
	return strings.Join(quoteAll(allowed), ", ")
}

// PermitsAny reports whether the policy honours exceptions at all: it opted
// in with spec.exceptions and did not set allow: false.
func (p *Policy) PermitsAny() bool {
	return p.guardrails != nil && (p.guardrails.Allow == nil || *p.guardrails.Allow)
}

// AllowsControl reports whether the guardrails let an exception name the
// control. It does not say whether the policy honours exceptions at all
// (PermitsAny).
func (p *Policy) AllowsControl(control policyv1alpha1.ControlName) bool {
	if p.guardrails == nil || p.guardrails.AllowedControls == nil {
		return p.guardrails != nil
	}
	return slices.Contains(p.guardrails.AllowedControls, control)
}

// Guardrails are the policy's spec.exceptions, for tools that write
// exceptions the policy will permit (podsieve exception generate); nil when
// the policy honours no exceptions.
func (p *Policy) Guardrails() *policyv1alpha1.ExceptionGuardrails { return p.guardrails }

// Exclusions are the rule's own podSecurity.exclude entries, in order: the
// j-th is spec.rules[i].podSecurity.exclude[j].
func (r *Rule) Exclusions() []Exclusion { return r.exclusions }

// exempts reports whether the object's runtime class or its requester is
// one the filter exempts.
func (f *filter) exempts(o *Object) bool { return f.exemption(o) != "" }

// exemption says what of the object the filter exempts, for explain; ""
// when nothing. A request without a user (outside admission) is never
// exempted by user.
func (f *filter) exemption(o *Object) string {
	if o.Spec != nil && o.Spec.RuntimeClassName != nil && slices.Contains(f.runtimeClasses, *o.Spec.RuntimeClassName) {
		return fmt.Sprintf("its runtimeClassName %q", *o.Spec.RuntimeClassName)
	}
	if o.RequestUser != "" && slices.Contains(f.usernames, o.RequestUser) {
		return fmt.Sprintf("requests by %q", o.RequestUser)
	}
	return ""
}
