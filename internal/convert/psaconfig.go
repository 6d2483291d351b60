package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/admission/api"
	"k8s.io/pod-security-admission/admission/api/load"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/manifest"
)

// PSAConfig is Pod Security Admission's configuration as the API server
// reads it (its --admission-control-config-file: an AdmissionConfiguration
// whose PodSecurity plugin holds a PodSecurityConfiguration, or that
// PodSecurityConfiguration alone): the defaults for namespaces without
// labels and the exemptions, which labels cannot say.
type PSAConfig struct {
	// Where names the document it was read from.
	Where  string
	Loc    manifest.Document
	Config *psaapi.PodSecurityConfiguration
}

func isAdmissionConfiguration(d *Document) bool {
	return d.Kind == "AdmissionConfiguration" && strings.HasPrefix(d.APIVersion, "apiserver.config.k8s.io/")
}

func isPodSecurityConfiguration(d *Document) bool {
	return d.Kind == "PodSecurityConfiguration" && strings.HasPrefix(d.APIVersion, "pod-security.admission.config.k8s.io/")
}

// PSAConfigs reads the Pod Security Admission configuration among docs: at
// most one; nil when there is none. The error is bad input.
func PSAConfigs(docs []Document) (*PSAConfig, error) {
	var found *PSAConfig
	for i := range docs {
		d := &docs[i]
		var raw []byte
		switch {
		case isPodSecurityConfiguration(d):
			raw = d.JSON
		case isAdmissionConfiguration(d):
			var ac struct {
				Plugins []struct {
					Name          string          `json:"name"`
					Path          string          `json:"path"`
					Configuration json.RawMessage `json:"configuration"`
				} `json:"plugins"`
			}
			if err := json.Unmarshal(d.JSON, &ac); err != nil {
				return nil, atDoc(d.Loc, fmt.Errorf("%s: AdmissionConfiguration: %w", d.Where(), err))
			}
			for j, p := range ac.Plugins {
				if p.Name != "PodSecurity" {
					continue
				}
				if len(p.Configuration) == 0 {
					return nil, atDoc(d.Loc, fmt.Errorf("%s: AdmissionConfiguration: plugins[%d] (PodSecurity) has no inline configuration (path %q): give that file with -f instead", d.Where(), j, p.Path))
				}
				raw = p.Configuration
			}
			if raw == nil {
				continue // no PodSecurity plugin: nothing to carry
			}
		default:
			continue
		}
		cfg, err := load.LoadFromData(raw)
		if err != nil {
			return nil, atDoc(d.Loc, fmt.Errorf("%s: PodSecurityConfiguration: %w", d.Where(), err))
		}
		if found != nil {
			return nil, atDoc(d.Loc, fmt.Errorf("%s: a second Pod Security Admission configuration (the first is %s): give the API server's one", d.Where(), found.Where))
		}
		found = &PSAConfig{Where: d.Where(), Loc: d.Loc, Config: cfg}
	}
	return found, nil
}

// psaDefaults are the combos of the configuration's defaults: one per mode
// whose default level is not privileged.
func psaDefaults(cfg *PSAConfig, res *Result) []psaCombo {
	if cfg == nil {
		return nil
	}
	d := cfg.Config.Defaults
	n := &noter{res: res, loc: cfg.Loc, where: cfg.Where, object: "PodSecurityConfiguration"}
	var out []psaCombo
	for _, m := range []struct{ mode, level, version string }{
		{"enforce", d.Enforce, d.EnforceVersion}, {"audit", d.Audit, d.AuditVersion}, {"warn", d.Warn, d.WarnVersion},
	} {
		if m.level == "" || m.level == "privileged" {
			continue
		}
		out = append(out, psaCombo{mode: m.mode, labelLevel: m.level, level: m.level, version: versionOrLatest(m.version), isDefault: true})
		n.warn("defaults."+m.mode, "the default %s:%s applies to namespaces without the %s label: written as rule \"default\" of psa-%s-%s", m.level, versionOrLatest(m.version), psaLabelPrefix+m.mode, m.mode, m.level)
	}
	e := cfg.Config.Exemptions
	if len(e.Namespaces) > 0 || len(e.RuntimeClasses) > 0 || len(e.Usernames) > 0 {
		n.warn("exemptions", "carried to every rule: namespaces %v left out of its namespaceSelector, runtimeClasses %v and usernames %v in its exclude (usernames exempt at admission only; the background scan reports what those users created)",
			e.Namespaces, e.RuntimeClasses, e.Usernames)
	}
	return out
}

func versionOrLatest(v string) string {
	if v == "" {
		return "latest"
	}
	return v
}

// defaultVersion is the version Pod Security Admission applies in a mode
// when a namespace has the level label but no version label.
func defaultVersion(cfg *PSAConfig, mode string) string {
	if cfg == nil {
		return "latest"
	}
	d := cfg.Config.Defaults
	switch mode {
	case "enforce":
		return versionOrLatest(d.EnforceVersion)
	case "audit":
		return versionOrLatest(d.AuditVersion)
	}
	return versionOrLatest(d.WarnVersion)
}

// applyExemptions carries the configuration's exemptions to a rule: exempt
// namespaces out of its namespaceSelector (PSA does not evaluate them),
// exempt runtime classes and users into its exclude (either exempts).
func applyExemptions(rule *policyv1alpha1.PolicyRule, cfg *PSAConfig) {
	if cfg == nil {
		return
	}
	e := cfg.Config.Exemptions
	if len(e.Namespaces) > 0 {
		sel := rule.Match.NamespaceSelector
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: slices.Clone(e.Namespaces)})
	}
	if len(e.RuntimeClasses) > 0 || len(e.Usernames) > 0 {
		rule.Exclude = &policyv1alpha1.ResourceFilter{RuntimeClassNames: slices.Clone(e.RuntimeClasses), Usernames: slices.Clone(e.Usernames)}
	}
}

// defaultLevel is the configuration's default level for a mode, "" when
// there is no configuration or the default is privileged (no rule).
func defaultLevel(cfg *PSAConfig, mode string) string {
	if cfg == nil {
		return ""
	}
	d := cfg.Config.Defaults
	level := map[string]string{"enforce": d.Enforce, "audit": d.Audit, "warn": d.Warn}[mode]
	if level == "" || level == "privileged" {
		return ""
	}
	return level
}
