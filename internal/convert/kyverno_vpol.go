package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// Kyverno 1.14+'s CEL policies (policies.kyverno.io): ValidatingPolicies
// that implement Pod Security Standards controls, recognised by what their
// CEL tests (vpolFingerprint), become one SecurityPolicy rule per set that
// shares an action and a match; the set's controls decide the level, the
// controls of that level it does not implement are excluded. Anything else
// is noted, never converted looser.

// controlPart is one control at one level: Capabilities and Seccomp check
// more at restricted than at baseline.
type controlPart struct {
	control    policyv1alpha1.ControlName
	restricted bool
}

// libraryCheck is a ValidatingPolicy of Kyverno's CEL Pod Security library
// (kyverno/policies, pod-security-vpol), known by its fingerprint.
type libraryCheck struct {
	// name is the library policy's name, for messages.
	name  string
	parts []controlPart
	// version is the newest Pod Security Standards version whose checks of
	// these parts refuse every pod the CEL refuses; "" for latest.
	version string
	// stricter says which pods the converted check refuses that the CEL
	// admits, "" for none.
	stricter string
	// looser says which pods the CEL refuses that the converted check,
	// as the Pod Security Standards, admits: no podsieve rule refuses them.
	looser string
	// celError says where the API server's CEL libraries fail to evaluate
	// the CEL, which Kyverno's own tests show its engine does not: the
	// side-by-side tests cannot decide those pods for Kyverno.
	celError string
}

func base(c policyv1alpha1.ControlName) controlPart { return controlPart{control: c} }

// kyvernoLibrary maps fingerprints of the library's policies to what they
// check. Every revision of pod-security-vpol in kyverno/policies up to
// b9c4317 (2026-03-06) has these fingerprints; TestKyvernoLibrary checks
// them against the files and decides both sides on the upstream fixtures.
var kyvernoLibrary = map[string]libraryCheck{
	"01a6ea2ddac15c90b8359769481dfb97": {name: "disallow-capabilities", parts: []controlPart{base(policyv1alpha1.ControlCapabilities)},
		stricter: "an added capability written as the empty string, which Kyverno's CEL allows"},
	"f98a42560e305062addeda582e907edf": {name: "disallow-host-namespaces", parts: []controlPart{base(policyv1alpha1.ControlHostNamespaces)}},
	"8f62d0885bdc50478b3f84fa44f8c796": {name: "disallow-host-path", parts: []controlPart{base(policyv1alpha1.ControlHostPathVolumes)}},
	"c28e10d7e92617d1e4704cdb899c6a29": {name: "disallow-host-ports", parts: []controlPart{base(policyv1alpha1.ControlHostPorts)}},
	"caa626a1a955741cfd077818ea6c6434": {name: "disallow-host-process", parts: []controlPart{base(policyv1alpha1.ControlHostProcess)},
		stricter: "spec.securityContext.windowsOptions.hostProcess: true, which Kyverno's CEL does not test (it tests containers only)"},
	"7f3b96fbeba37368ec0364cfdf9bb13d": {name: "disallow-privileged-containers", parts: []controlPart{base(policyv1alpha1.ControlPrivilegedContainers)}},
	// v1.35 admits any procMount, runAsNonRoot and runAsUser in a pod with
	// hostUsers: false; these CEL checks do not.
	"9f8294a0a43120b82a99d26383f25927": {name: "disallow-proc-mount", parts: []controlPart{base(policyv1alpha1.ControlProcMountType)}, version: "v1.34"},
	"7a2c6f93343b3dc49d561ee6110eeb0c": {name: "disallow-selinux", parts: []controlPart{base(policyv1alpha1.ControlSELinux)}, version: "v1.30"},
	"adacc26d690115e4dae27f230b8a834e": {name: "restrict-seccomp", parts: []controlPart{base(policyv1alpha1.ControlSeccomp)}},
	"1960fcd32b1881b61314bccb2bf3f039": {name: "restrict-sysctls", parts: []controlPart{base(policyv1alpha1.ControlSysctls)}, version: "v1.26"},
	// Its second validation calls orValue on a list, which the API
	// server's CEL libraries cannot evaluate (no such overload) when a
	// container adds a capability; Kyverno's chainsaw test for the policy
	// admits such a pod (NET_BIND_SERVICE) under Deny.
	"216209aa98e1aeb58044beca6f3c09d4": {name: "disallow-capabilities-strict", parts: []controlPart{
		base(policyv1alpha1.ControlCapabilities), {policyv1alpha1.ControlCapabilities, true}},
		looser:   "Windows pods (spec.os.name: windows) that do not drop ALL, which the Pod Security Standards exempt since v1.25",
		celError: "a container that adds a capability"},
	"8c6526c08adfa62fa98ed116d0f36b59": {name: "disallow-privilege-escalation", parts: []controlPart{{policyv1alpha1.ControlPrivilegeEscalation, true}},
		looser: "Windows pods (spec.os.name: windows) that do not set allowPrivilegeEscalation: false, which the Pod Security Standards exempt since v1.25"},
	"c25e2f504528d0943fa363d617ef832b": {name: "require-run-as-non-root-user", parts: []controlPart{{policyv1alpha1.ControlRunningAsNonRootUser, true}}, version: "v1.34"},
	"c74b5b859a8c144783248463d2bdb871": {name: "require-run-as-nonroot", parts: []controlPart{{policyv1alpha1.ControlRunningAsNonRoot, true}}, version: "v1.34",
		stricter: "spec.securityContext.runAsNonRoot: false with every container setting runAsNonRoot: true, which Kyverno's CEL allows"},
	// Its CEL accepts an unset seccomp profile: the baseline check.
	"c32ba034cd84fef0de6752ae75d6d5c4": {name: "restrict-seccomp-strict", parts: []controlPart{base(policyv1alpha1.ControlSeccomp)}},
	// Its allowlist refuses hostPath volumes too, which the Pod Security
	// Standards place under HostPath Volumes.
	"0b3eb2e08faa86fa3e01e54b1baf3bde": {name: "restrict-volume-types", parts: []controlPart{{policyv1alpha1.ControlVolumeTypes, true}, base(policyv1alpha1.ControlHostPathVolumes)}},
}

// restrictedOnly are the controls only restricted checks; controlParts are
// the parts of a control at a level.
var restrictedOnly = []policyv1alpha1.ControlName{
	policyv1alpha1.ControlVolumeTypes, policyv1alpha1.ControlPrivilegeEscalation,
	policyv1alpha1.ControlRunningAsNonRoot, policyv1alpha1.ControlRunningAsNonRootUser,
}

func controlParts(c policyv1alpha1.ControlName, level policyv1alpha1.PodSecurityLevel) []controlPart {
	switch {
	case slices.Contains(restrictedOnly, c):
		return []controlPart{{c, true}}
	case level == policyv1alpha1.LevelRestricted && (c == policyv1alpha1.ControlCapabilities || c == policyv1alpha1.ControlSeccomp):
		return []controlPart{base(c), {c, true}}
	}
	return []controlPart{base(c)}
}

// isKyvernoCEL says whether d is of a policies.kyverno.io kind read.
func isKyvernoCEL(d *Document) bool {
	group, _, _ := strings.Cut(d.APIVersion, "/")
	// CELPolicyException is PolicyException's name in early v1alpha1.
	return group == "policies.kyverno.io" && (isVPol(d.Kind) || d.Kind == "PolicyException" || d.Kind == "CELPolicyException")
}

func isVPol(kind string) bool {
	return kind == "ValidatingPolicy" || kind == "NamespacedValidatingPolicy"
}

// vpolID identifies a ValidatingPolicy in vpolRefs: its kind and name,
// and the namespace of a NamespacedValidatingPolicy.
type vpolID struct {
	kind string
	name types.NamespacedName
}

// vpolIDOf is the identity of a ValidatingPolicy of kind, named name, in
// namespace if the kind is namespaced.
func vpolIDOf(kind, namespace, name string) vpolID {
	if kind == "NamespacedValidatingPolicy" {
		return vpolID{kind: kind, name: types.NamespacedName{Namespace: namespace, Name: name}}
	}
	return vpolID{kind: kind, name: types.NamespacedName{Name: name}}
}

// vpolMember is one recognised ValidatingPolicy.
type vpolMember struct {
	d     *Document
	vp    *kyvernoVPol
	n     *noter
	check libraryCheck
	// key is its key in vpolRefs; name the converted policy's name when
	// it is converted alone.
	key  vpolID
	name string
}

// vpolGroup is the recognised ValidatingPolicies that become one rule.
type vpolGroup struct {
	key        string
	action     policyv1alpha1.PolicyAction
	background *bool
	match      *policyv1alpha1.ResourceFilter
	exclude    *policyv1alpha1.ResourceFilter
	members    []*vpolMember
}

// vpolRef is where a converted ValidatingPolicy went.
type vpolRef struct {
	policy, rule string
	group        *vpolGroup
	member       *vpolMember
}

// vpols converts the ValidatingPolicies, grouped.
func (c *kyvernoConverter) vpols(docs []*Document, vps []*kyvernoVPol) error {
	var groups []*vpolGroup
	for i, vp := range vps {
		m, g := c.vpolMember(docs[i], vp)
		if m == nil {
			continue
		}
		at := slices.IndexFunc(groups, func(x *vpolGroup) bool { return x.key == g.key })
		if at < 0 {
			groups = append(groups, g)
			at = len(groups) - 1
		}
		groups[at].members = append(groups[at].members, m)
	}
	var errs []error
	for _, g := range groups {
		if err := c.vpolGroupOutput(g); err != nil {
			errs = append(errs, err)
		}
	}
	return SortErrors(errs...)
}

// vpolMember reads one ValidatingPolicy: what it checks, its action, match
// and settings, and the group key they make. A nil member was noted and
// left out.
func (c *kyvernoConverter) vpolMember(d *Document, vp *kyvernoVPol) (*vpolMember, *vpolGroup) {
	n := newNoter(c.res, d)
	if ev := vp.Spec.Evaluation; ev != nil && ev.Mode != nil && *ev.Mode != "" && *ev.Mode != "Kubernetes" {
		n.untranslated("spec.evaluation.mode", "%q: the policy does not evaluate Kubernetes admission requests; it was left out", *ev.Mode)
		return nil, nil
	}
	fp, err := vpolFingerprint(&vp.Spec)
	if err != nil {
		n.untranslated("spec", "%v; the policy was left out", err)
		return nil, nil
	}
	check, ok := kyvernoLibrary[fp]
	if !ok {
		n.untranslated("spec.validations", "its CEL is not one of Kyverno's Pod Security library policies (pod-security-vpol) that convert recognises by what they test (fingerprint %s); podsieve cannot tell which control it implements, so it was left out: "+
			"write the Pod Security Standards control it enforces as a SecurityPolicy rule", fp)
		return nil, nil
	}
	m := &vpolMember{d: d, vp: vp, n: n, check: check, key: vpolIDOf(d.Kind, vp.Metadata.Namespace, vp.Metadata.Name), name: vp.Metadata.Name}
	g := &vpolGroup{}
	g.action = vpolAction(n, vp.Spec.ValidationActions)
	if vp.Spec.FailurePolicy != nil && *vp.Spec.FailurePolicy == string(admissionregistrationv1.Ignore) {
		n.warn("spec.failurePolicy", "Ignore: Kyverno admits when its CEL fails to evaluate; podsieve's engine does not fail open")
	}
	if len(vp.Spec.AuditAnnotations) > 0 {
		n.warn("spec.auditAnnotations", "no counterpart; podsieve records its own audit annotations")
	}
	if len(vp.Spec.Autogen) > 0 {
		n.warn("spec.autogen", "podsieve always checks pod controllers' templates as their pods; Kyverno's autogen settings are not carried over")
	}
	if len(vp.Spec.WebhookConfiguration) > 0 {
		n.warn("spec.webhookConfiguration", "no counterpart; podsieve's webhook settings are the chart's")
	}
	if ev := vp.Spec.Evaluation; ev != nil {
		if ev.Admission != nil && ev.Admission.Enabled != nil && !*ev.Admission.Enabled {
			n.warn("spec.evaluation.admission.enabled", "false: Kyverno only reports in the background; converted with action Audit")
			g.action = policyv1alpha1.ActionAudit
		}
		if ev.Background != nil && ev.Background.Enabled != nil {
			b := *ev.Background.Enabled
			g.background = &b
		}
	}
	if !c.vpolMatch(n, vp.Spec.MatchConstraints, g) {
		return nil, nil
	}
	if !c.vpolConditions(n, vp.Spec.MatchConditions, g) {
		return nil, nil
	}
	if d.Kind == "NamespacedValidatingPolicy" {
		// It applies in its own namespace only.
		ns := vp.Metadata.Namespace
		if ns == "" {
			ns = "default"
			n.warn("metadata.namespace", "unset; taken as %q, where kubectl would create it", ns)
		}
		m.key, m.name = vpolIDOf(d.Kind, ns, vp.Metadata.Name), ns+"-"+vp.Metadata.Name
		switch {
		case g.match == nil:
			g.match = &policyv1alpha1.ResourceFilter{Namespaces: []string{ns}}
		case len(g.match.Namespaces) == 0:
			g.match.Namespaces = []string{ns}
		case slices.Contains(g.match.Namespaces, ns):
			g.match.Namespaces = []string{ns}
		default:
			n.warn("spec.matchConditions", "select only namespaces other than its own %q, where it applies: the policy applies nowhere, and no rule is written for it", ns)
			return nil, nil
		}
		if g.exclude != nil && slices.Contains(g.exclude.Namespaces, ns) {
			n.warn("spec.matchConditions", "exclude its own namespace %q: the policy applies nowhere, and no rule is written for it", ns)
			return nil, nil
		}
		n.warn("metadata.name", "a NamespacedValidatingPolicy converts into a cluster-scoped SecurityPolicy whose rule matches namespace %q only", ns)
	}
	key, _ := json.Marshal([]any{g.action, g.background, g.match, g.exclude})
	g.key = string(key)
	return m, g
}

// vpolAction reads validationActions: Deny enforces; Warn and Audit
// without Deny admit.
func vpolAction(n *noter, actions []admissionregistrationv1.ValidationAction) policyv1alpha1.PolicyAction {
	switch {
	case len(actions) == 0:
		n.warn("spec.validationActions", "unset, which Kyverno reads as Deny: converted with action Enforce")
		return policyv1alpha1.ActionEnforce
	case slices.Contains(actions, admissionregistrationv1.Deny):
		if len(actions) > 1 {
			n.warn("spec.validationActions", "Deny with %v: converted with action Enforce; podsieve records refusals in its own audit annotation", actions[1:])
		}
		return policyv1alpha1.ActionEnforce
	case slices.Contains(actions, admissionregistrationv1.Warn):
		if len(actions) > 1 {
			n.warn("spec.validationActions", "Warn with Audit: converted with action Warn, which also records violations")
		}
		return policyv1alpha1.ActionWarn
	}
	return policyv1alpha1.ActionAudit
}

// vpolMatch reads matchConstraints: the policy must select pods; its
// namespaceSelector and objectSelector become the rule's match.
func (c *kyvernoConverter) vpolMatch(n *noter, mc *admissionregistrationv1.MatchResources, g *vpolGroup) bool {
	if mc == nil {
		n.untranslated("spec.matchConstraints", "unset: the policy matches nothing in Kyverno; it was left out")
		return false
	}
	pods := false
	for i, r := range mc.ResourceRules {
		if (slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) && (slices.Contains(r.Resources, "pods") || slices.Contains(r.Resources, "*")) {
			pods = true
			if len(r.ResourceNames) > 0 {
				n.untranslated(fmt.Sprintf("spec.matchConstraints.resourceRules[%d].resourceNames", i), "a rule cannot select pods by name; the rule applies to every pod")
			}
			ops := r.Operations
			if !slices.Contains(ops, admissionregistrationv1.OperationAll) && (!slices.Contains(ops, admissionregistrationv1.Create) || !slices.Contains(ops, admissionregistrationv1.Update)) {
				n.warn(fmt.Sprintf("spec.matchConstraints.resourceRules[%d].operations", i), "%v: podsieve checks pods on create and update alike", ops)
			}
		}
	}
	if !pods {
		n.untranslated("spec.matchConstraints.resourceRules", "select no pods; the policy was left out")
		return false
	}
	if len(mc.ExcludeResourceRules) > 0 {
		n.untranslated("spec.matchConstraints.excludeResourceRules", "no counterpart; the rule applies to what they exclude")
	}
	f := &policyv1alpha1.ResourceFilter{}
	if s := mc.NamespaceSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		f.NamespaceSelector = s.DeepCopy()
	}
	if s := mc.ObjectSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		f.Selector = s.DeepCopy()
	}
	if f.NamespaceSelector != nil || f.Selector != nil {
		g.match = f
	}
	return true
}

// vpolConditions reads the policy's matchConditions: a namespace test
// becomes the rule's match or exclude namespaces. Anything else is noted and
// the rule applies more widely than the policy. False: they hold in no
// namespace, and the policy is left out.
func (c *kyvernoConverter) vpolConditions(n *noter, conds []admissionregistrationv1.MatchCondition, g *vpolGroup) bool {
	if len(conds) == 0 {
		return true
	}
	atoms, why, ok := matchConditionAtoms(conds)
	if ok {
		for _, a := range atoms {
			if a.field != "namespace" {
				ok, why = false, "a test of the object's name, which a SecurityPolicy rule cannot select on (a PolicyException can)"
			}
		}
	}
	if !ok {
		n.untranslated("spec.matchConditions", "%s; the rule applies to every pod they leave out", why)
		return true
	}
	atoms = literalAtoms(n, "spec.matchConditions", atoms)
	var in, out []string
	first := true
	for _, a := range atoms {
		if a.negated {
			out = appendNew(out, a.values...)
			continue
		}
		if first {
			in, first = slices.Clone(a.values), false
			continue
		}
		in = slices.DeleteFunc(in, func(v string) bool { return !slices.Contains(a.values, v) })
	}
	in = slices.DeleteFunc(in, func(v string) bool { return slices.Contains(out, v) })
	if len(in) > maxFilterNamespaces || len(out) > maxFilterNamespaces {
		n.untranslated("spec.matchConditions", "more than %d namespaces; the rule applies to every pod they leave out", maxFilterNamespaces)
		return true
	}
	if !first {
		if len(in) == 0 {
			n.warn("spec.matchConditions", "no namespace satisfies them: the policy applies nowhere, and no rule is written for it")
			return false
		}
		if g.match == nil {
			g.match = &policyv1alpha1.ResourceFilter{}
		}
		g.match.Namespaces = in
		return true
	}
	if len(out) > 0 {
		g.exclude = &policyv1alpha1.ResourceFilter{Namespaces: out}
	}
	return true
}

// maxFilterNamespaces is a rule filter's limit on namespaces.
const maxFilterNamespaces = 64

func appendNew(s []string, vs ...string) []string {
	for _, v := range vs {
		if !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	return s
}

// vpolGroupOutput writes a group's SecurityPolicy: one rule at the level its
// checks reach, the controls of that level it does not implement excluded.
func (c *kyvernoConverter) vpolGroupOutput(g *vpolGroup) error {
	ps, missing, partial := g.podSecurity()
	level := ps.Level
	first := g.members[0]
	name := first.name
	if len(g.members) > 1 {
		name = "kyverno-pod-security-" + string(level)
	}
	name = c.policyName(name)
	sp := newPolicy(name)
	sp.Spec.Action = g.action
	sp.Spec.Background = g.background
	rule := policyv1alpha1.PolicyRule{Name: string(level), Match: g.match, Exclude: g.exclude, PodSecurity: ps}
	sp.Spec.Rules = []policyv1alpha1.PolicyRule{rule}
	if _, err := engine.CompilePolicy(sp); err != nil {
		return atDoc(first.d.Loc, fmt.Errorf("%s: %s %s: the converted SecurityPolicy %s does not compile: %w", first.d.Where(), first.d.Kind, first.d.Name, name, err))
	}
	var from []string
	for _, m := range g.members {
		from = append(from, fmt.Sprintf("%s (%s %s)", m.d.Where(), m.d.Kind, m.d.Name))
		c.vpolRefs[m.key] = vpolRef{policy: name, rule: rule.Name, group: g, member: m}
		m.noteConverted(name, rule.Name, ps, len(g.members))
	}
	if len(missing) > 0 {
		first.n.warn("spec", "the ValidatingPolicies converted into SecurityPolicy %q implement no check of %s at %s; those controls are excluded from the rule (remove the exclusions to enforce the whole profile)",
			name, strings.Join(missing, ", "), level)
	}
	if len(partial) > 0 {
		first.n.warn("spec", "the ValidatingPolicies converted into SecurityPolicy %q implement only part of %s at %s; podsieve checks the whole control, which refuses more",
			name, strings.Join(partial, ", "), level)
	}
	c.res.Objects = append(c.res.Objects, Output{From: strings.Join(from, ", "), Object: sp})
	return nil
}

// podSecurity is the group's rule: the level its checks reach, at the
// earliest version one of them is pinned to (else latest), excluding the
// controls of that level none of them checks (missing); partial are those
// only partly checked.
func (g *vpolGroup) podSecurity() (ps policyv1alpha1.PodSecurity, missing, partial []string) {
	covered := map[controlPart][]*vpolMember{}
	level := policyv1alpha1.LevelBaseline
	version := ""
	for _, m := range g.members {
		for _, p := range m.check.parts {
			covered[p] = append(covered[p], m)
			if p.restricted {
				level = policyv1alpha1.LevelRestricted
			}
		}
		if v := m.check.version; v != "" && (version == "" || minorOf(v) < minorOf(version)) {
			version = v
		}
	}
	ps = policyv1alpha1.PodSecurity{Level: level, Version: version}
	if version == "" {
		ps.Version = policyv1alpha1.VersionLatest
	}
	for _, ctl := range policyv1alpha1.Controls {
		if level == policyv1alpha1.LevelBaseline && slices.Contains(restrictedOnly, ctl) {
			continue
		}
		parts := controlParts(ctl, level)
		n := 0
		for _, p := range parts {
			if len(covered[p]) > 0 {
				n++
			}
		}
		switch {
		case n == 0:
			missing = append(missing, string(ctl))
			ps.Exclude = append(ps.Exclude, policyv1alpha1.PodSecurityExclusion{ControlName: ctl})
		case n < len(parts):
			partial = append(partial, string(ctl))
		}
	}
	return ps, missing, partial
}

// noteConverted tells, on the ValidatingPolicy, which rule it became and
// where podsieve's check decides differently from its CEL.
func (m *vpolMember) noteConverted(policy, rule string, ps policyv1alpha1.PodSecurity, members int) {
	m.n.warn("spec", "recognised as Kyverno's %s (%s): converted into SecurityPolicy %q rule %q (%s, version %s) with %d ValidatingPolicies",
		m.check.name, partsString(m.check.parts), policy, rule, ps.Level, ps.Version, members)
	if m.check.stricter != "" {
		m.n.warn("spec.validations", "podsieve's check also refuses %s", m.check.stricter)
	}
	if m.check.celError != "" {
		m.n.warn("spec.validations", "its CEL calls orValue on a list, which the API server's CEL libraries cannot evaluate for %s (no such overload): as a ValidatingAdmissionPolicy it would refuse every such pod. Kyverno's own tests admit them where the Pod Security Standards do, and so does podsieve", m.check.celError)
	}
	if m.check.looser != "" {
		m.n.untranslated("spec.validations", "Kyverno's CEL also refuses %s; podsieve's check admits them, as the Pod Security Standards do", m.check.looser)
	}
	if m.check.version != "" {
		m.n.warn("spec.validations", "Kyverno's CEL decides as Pod Security Standards %s, not later versions (which admit more): the rule is pinned to version %s", m.check.version, ps.Version)
	}
}

func partsString(parts []controlPart) string {
	var s []string
	for _, p := range parts {
		l := "baseline"
		if p.restricted {
			l = "restricted"
		}
		s = append(s, fmt.Sprintf("%s at %s", p.control, l))
	}
	return strings.Join(slices.Compact(s), ", ")
}

// minorOf reads "v1.N".
func minorOf(v string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(v, "v1."))
	return n
}

// policyName returns name, or name-N when a converted policy has it.
func (c *kyvernoConverter) policyName(name string) string {
	taken := func(s string) bool {
		return slices.ContainsFunc(c.res.Objects, func(o Output) bool {
			sp, ok := o.Object.(*policyv1alpha1.SecurityPolicy)
			return ok && sp.Name == s
		})
	}
	out := name
	for i := 2; taken(out); i++ {
		out = fmt.Sprintf("%s-%d", name, i)
	}
	return out
}
