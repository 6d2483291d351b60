package convert

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/pod-security-admission/api"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/manifest"
)

// Namespace is a Namespace and where it was read.
type Namespace struct {
	// Where names the source for messages: "ns.yaml, document 2" or "cluster".
	Where string
	// Loc is the document it was read from, if any.
	Loc       manifest.Document
	Namespace *corev1.Namespace
}

// namespacesReads are the kinds Namespaces reads; it notes and ignores the
// others.
var namespacesReads = reads{kinds: "v1 Namespace, or Pod Security Admission's AdmissionConfiguration or PodSecurityConfiguration", is: func(d *Document) bool {
	return (d.APIVersion == "v1" && d.Kind == "Namespace") || isAdmissionConfiguration(d) || isPodSecurityConfiguration(d)
}}

// Namespaces decodes the v1 Namespaces among docs. Other kinds are noted
// and ignored; the error is bad input.
func Namespaces(docs []Document, res *Result) ([]Namespace, error) {
	var out []Namespace
	var errs []error
	for i := range docs {
		d := &docs[i]
		if !namespacesReads.is(d) {
			namespacesReads.ignore(res, d)
			continue
		}
		if isAdmissionConfiguration(d) || isPodSecurityConfiguration(d) {
			continue // PSAConfigs reads them
		}
		ns := &corev1.Namespace{}
		if err := decodeStrict(d, ns); err != nil {
			errs = append(errs, err)
			continue
		}
		if ns.Name == "" {
			errs = append(errs, atDoc(d.Loc, fmt.Errorf("%s: Namespace: metadata.name is required", d.Where())))
			continue
		}
		out = append(out, Namespace{Where: d.Where(), Loc: d.Loc, Namespace: ns})
	}
	return out, SortErrors(errs...)
}

// psaModes are Pod Security Admission's modes, with the action each becomes.
var psaModes = []struct {
	mode   string
	action policyv1alpha1.PolicyAction
}{
	{"enforce", policyv1alpha1.ActionEnforce},
	{"audit", policyv1alpha1.ActionAudit},
	{"warn", policyv1alpha1.ActionWarn},
}

const psaLabelPrefix = "pod-security.kubernetes.io/"

// psaCombo is one mode, level and version label value ("" when the version
// label is absent) that some namespace carries.
type psaCombo struct {
	mode, labelLevel, level, version string
	// isDefault marks the configuration's default for the mode, which
	// applies where the mode's level label is absent; labelledVersion, at
	// the version a version label (without a level label) names.
	isDefault, labelledVersion bool
}

// PSALabels turns the pod-security.kubernetes.io labels of namespaces into
// SecurityPolicies: one per mode and level (psa-enforce-baseline, ...),
// with one rule per version whose namespaceSelector selects exactly the
// namespaces labelled so, now and later. With Pod Security Admission's
// configuration (cfg, may be nil), its exemptions and defaults carry over:
// exempt namespaces are left out of every rule's namespaceSelector, exempt
// runtime classes and users go to every rule's exclude, the default level
// of each mode becomes a rule for the namespaces without that mode's label,
// and a level label without a version label means the default version. res
// may hold notes already.
func PSALabels(namespaces []Namespace, cfg *PSAConfig, res *Result) *Result {
	if res == nil {
		res = &Result{}
	}
	defaults := psaDefaults(cfg, res)
	from := map[psaCombo][]string{}
	for _, ns := range namespaces {
		n := &noter{res: res, loc: ns.Loc, where: ns.Where, object: "Namespace " + ns.Namespace.Name}
		for _, m := range psaModes {
			if c, ok := namespaceCombo(n, ns.Namespace.Labels, m.mode, cfg); ok {
				from[c] = append(from[c], ns.Namespace.Name)
			}
		}
	}
	var sp *policyv1alpha1.SecurityPolicy
	var sources []string // the namespaces behind sp
	var mode string
	flush := func() {
		if sp != nil {
			slices.Sort(sources)
			sources = slices.Compact(sources)
			res.Objects = append(res.Objects, Output{Object: sp,
				From: fmt.Sprintf("the %s labels of Namespaces %s", psaLabelPrefix+mode, strings.Join(sources, ", "))})
		}
	}
	for _, c := range sortedCombos(from, defaults) {
		name := "psa-" + c.mode + "-" + c.level
		if sp == nil || sp.Name != name {
			flush()
			sp, sources, mode = newPolicy(name), nil, c.mode
			sp.Spec.Action = psaModes[psaModeIndex(c.mode)].action
		}
		sources = append(sources, from[c]...)
		if c.isDefault && !c.labelledVersion {
			sources = append(sources, "without the labels (the configuration's default)")
		}
		sp.Spec.Rules = append(sp.Spec.Rules, psaRule(c, cfg))
	}
	flush()
	res.sortNotes()
	return res
}

// namespaceCombo is the level and version a namespace's labels set for one
// mode, as Pod Security Admission reads them; false when they set none
// (privileged, nothing, or a level that applies nothing), with a note.
func namespaceCombo(n *noter, labels map[string]string, mode string, cfg *PSAConfig) (psaCombo, bool) {
	levelKey, versionKey := psaLabelPrefix+mode, psaLabelPrefix+mode+"-version"
	level, hasLevel := labels[levelKey]
	version, hasVersion := labels[versionKey]
	field := "metadata.labels[" + levelKey + "]"
	if !hasLevel {
		if !hasVersion {
			return psaCombo{}, false
		}
		if d := defaultLevel(cfg, mode); d != "" {
			// The configured default level, at the labelled version.
			return psaCombo{mode: mode, labelLevel: d, level: d, version: version, isDefault: true, labelledVersion: true}, true
		}
		n.warn("metadata.labels["+versionKey+"]", "a version without a level: Pod Security Admission applies its configured default level (privileged unless the AdmissionConfiguration says otherwise) in %s mode; no rule is written", mode)
		return psaCombo{}, false
	}
	if errs := validation.IsValidLabelValue(level); len(errs) > 0 {
		n.untranslated(field, "%q is not a valid label value (the API server would refuse this Namespace): %s", level, strings.Join(errs, "; "))
		return psaCombo{}, false
	}
	if errs := validation.IsValidLabelValue(version); hasVersion && len(errs) > 0 {
		n.untranslated("metadata.labels["+versionKey+"]", "%q is not a valid label value (the API server would refuse this Namespace): %s", version, strings.Join(errs, "; "))
		return psaCombo{}, false
	}
	// As Pod Security Admission: an invalid enforce level is restricted
	// (fail closed), an invalid audit or warn level is privileged (fail
	// open), an invalid version is latest. The converted rule selects the
	// label as written and does the same.
	lv, err := api.ParseLevel(level)
	if err != nil {
		if mode != "enforce" {
			n.warn(field, "%q is not a level; Pod Security Admission then applies nothing in %s mode, and neither does the output: fix the label", level, mode)
			return psaCombo{}, false
		}
		n.warn(field, "%q is not a level; Pod Security Admission then enforces restricted, and so does the converted rule: fix the label", level)
	}
	if hasVersion {
		if _, err := api.ParseVersion(version); err != nil {
			n.warn("metadata.labels["+versionKey+"]", "%q is not a version; Pod Security Admission then uses latest, and so does the converted rule: fix the label", version)
		}
	}
	if lv == api.LevelPrivileged {
		n.warn(field, "privileged enforces nothing; no rule is needed")
		return psaCombo{}, false
	}
	return psaCombo{mode: mode, labelLevel: level, level: string(lv), version: version}, true
}

// psaModeIndex is a mode's index in psaModes.
func psaModeIndex(mode string) int {
	return slices.IndexFunc(psaModes, func(pm struct {
		mode   string
		action policyv1alpha1.PolicyAction
	}) bool {
		return pm.mode == mode
	})
}

// sortedCombos are the labelled combinations and the configured defaults
// no namespace labels, by mode, level, then version: each mode and level
// is one policy, each version one of its rules.
func sortedCombos(from map[psaCombo][]string, defaults []psaCombo) []psaCombo {
	combos := make([]psaCombo, 0, len(from)+len(defaults))
	for c := range from {
		combos = append(combos, c)
	}
	for _, c := range defaults {
		if _, ok := from[c]; !ok {
			combos = append(combos, c)
		}
	}
	slices.SortFunc(combos, func(a, b psaCombo) int {
		return cmp.Or(cmp.Compare(psaModeIndex(a.mode), psaModeIndex(b.mode)), cmp.Compare(a.level, b.level), boolCompare(a.isDefault, b.isDefault),
			boolCompare(a.labelledVersion, b.labelledVersion), cmp.Compare(a.labelLevel, b.labelLevel), compareVersions(a.version, b.version))
	})
	return combos
}

// psaRule is the rule for one combination: its level at its version, for
// the namespaces whose labels select it, with the configured exemptions.
func psaRule(c psaCombo, cfg *PSAConfig) policyv1alpha1.PolicyRule {
	levelKey, versionKey := psaLabelPrefix+c.mode, psaLabelPrefix+c.mode+"-version"
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{levelKey: c.labelLevel}}
	rule := policyv1alpha1.PolicyRule{PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.PodSecurityLevel(c.level)}}
	_, versionErr := api.ParseVersion(c.version)
	switch {
	case c.isDefault && c.labelledVersion:
		// A version label without a level label: the default level at
		// that version, as Pod Security Admission reads it.
		rule.Name = ruleName("default-" + c.version)
		rule.PodSecurity.Version = c.version
		if versionErr != nil {
			rule.PodSecurity.Version = policyv1alpha1.VersionLatest
		}
		sel = &metav1.LabelSelector{MatchLabels: map[string]string{versionKey: c.version},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: levelKey, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	case c.isDefault:
		// The namespaces without this mode's labels get the default.
		rule.Name = "default"
		rule.PodSecurity.Version = c.version
		sel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: levelKey, Operator: metav1.LabelSelectorOpDoesNotExist}, {Key: versionKey, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	case c.version == "" && defaultVersion(cfg, c.mode) != policyv1alpha1.VersionLatest:
		// A level without a version label: the configured default
		// version, as Pod Security Admission reads it.
		rule.Name = ruleName("default-version-" + defaultVersion(cfg, c.mode))
		rule.PodSecurity.Version = defaultVersion(cfg, c.mode)
		sel.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: versionKey, Operator: metav1.LabelSelectorOpDoesNotExist}}
	case c.version == "":
		rule.Name = "latest"
		rule.PodSecurity.Version = policyv1alpha1.VersionLatest
		sel.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: versionKey, Operator: metav1.LabelSelectorOpDoesNotExist}}
	case c.version == "latest":
		rule.Name = "latest-labelled"
		rule.PodSecurity.Version = policyv1alpha1.VersionLatest
		sel.MatchLabels[versionKey] = c.version
	case versionErr != nil:
		rule.Name = ruleName("invalid-version-" + c.version)
		rule.PodSecurity.Version = policyv1alpha1.VersionLatest
		sel.MatchLabels[versionKey] = c.version
	default:
		rule.Name = ruleName(c.version)
		rule.PodSecurity.Version = c.version
		sel.MatchLabels[versionKey] = c.version
	}
	if c.labelLevel != c.level {
		rule.Name = ruleName("invalid-level-" + c.labelLevel + "-" + rule.Name)
	}
	rule.Match = &policyv1alpha1.ResourceFilter{NamespaceSelector: sel}
	applyExemptions(&rule, cfg)
	return rule
}

// compareVersions orders an absent version first, then latest, then v1.N by N.
func compareVersions(a, b string) int {
	rank := func(v string) (int, int) {
		switch v {
		case "":
			return 0, 0
		case "latest":
			return 1, 0
		}
		minor, _ := strconv.Atoi(strings.TrimPrefix(v, "v1."))
		return 2, minor
	}
	ra, ma := rank(a)
	rb, mb := rank(b)
	return cmp.Or(cmp.Compare(ra, rb), cmp.Compare(ma, mb), cmp.Compare(a, b))
}

// boolCompare orders false before true.
func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
