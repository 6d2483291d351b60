package convert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// The policy-wide settings of a Kyverno ClusterPolicy or Policy: its name
// and namespace, its failure action, and the settings podsieve has no
// counterpart for.

// naming finds the converted policy's name: a namespaced Policy becomes a
// cluster-scoped SecurityPolicy named after its namespace too.
func (p *kyvernoPolicyConversion) naming() error {
	d, kp, n := p.d, p.kp, p.n
	p.key = kyvernoPolicyName(d.Kind, kp.Metadata)
	p.name = kp.Metadata.Name
	if p.name == "" {
		return fmt.Errorf("%s: %s: metadata.name is required", d.Where(), d.Kind)
	}
	if d.Kind == "Policy" {
		ns := kp.Metadata.Namespace
		if ns == "" {
			ns = "default"
			p.key = ns + "/" + p.name
			n.warn("metadata.namespace", "unset; taken as %q, where kubectl would create it", ns)
		}
		p.namespace = ns
		p.name = ns + "-" + p.name
		n.warn("metadata.name", "a namespaced Policy becomes the cluster-scoped SecurityPolicy %q whose rules match namespace %q only", p.name, ns)
	}
	return nil
}

// settings reads the failure action and notes the policy-wide settings that
// have no counterpart.
func (p *kyvernoPolicyConversion) settings() error {
	d, kp, n := p.d, p.kp, p.n
	// Kyverno's default action is Audit; podsieve's is Enforce, so the
	// output always says which.
	p.action = policyv1alpha1.ActionAudit
	if s := kp.Spec.ValidationFailureAction; s != "" {
		a, ok := kyvernoAction(s)
		if !ok {
			return fmt.Errorf("%s: %s %s: spec.validationFailureAction: %q is not an action; use Enforce or Audit", d.Where(), d.Kind, d.Name, s)
		}
		p.action = a
	}
	spec := kp.Spec
	if len(spec.ValidationFailureActionOverrides) > 0 {
		n.untranslated("spec.validationFailureActionOverrides", "per-namespace actions have no counterpart; every namespace gets action %s", p.action)
	}
	if spec.Admission != nil && !*spec.Admission {
		p.action = policyv1alpha1.ActionAudit
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
	sortFieldNotes(p.c.res.Notes, n)
	return nil
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

// sortFieldNotes orders the notes of one object that were added from a map
// by field, so that output is stable.
func sortFieldNotes(notes []Note, n *noter) {
	start := len(notes)
	for start > 0 && notes[start-1].Where == n.where && notes[start-1].Object == n.object {
		start--
	}
	slices.SortStableFunc(notes[start:], func(a, b Note) int { return strings.Compare(a.Field, b.Field) })
}
