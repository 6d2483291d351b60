package engine

import (
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Some restricted settings are required of every container but may be set
// once for the pod, where every container that sets none inherits them:
// the seccomp profile and runAsNonRoot. A container that leaves one unset
// fails each on its own, and the containers a mutating webhook injected
// (a mesh's init container) are ones their users cannot edit; one pod-level
// setting fixes them all. PodLevelFixes names it.

// podLevelFix is one such setting.
type podLevelFix struct {
	control policyv1alpha1.ControlName
	// ctr are the container fields whose missing value it supplies.
	ctr ctrField
	// pod is the pod-level field, and set what to write there.
	pod, set string
	// caveat is what else the setting asks of the containers.
	caveat string
}

var podLevelFixes = []podLevelFix{
	{control: policyv1alpha1.ControlSeccomp, ctr: fCtrSeccompType, pod: fPodSeccompType, set: "RuntimeDefault"},
	{control: policyv1alpha1.ControlRunningAsNonRoot, ctr: fCtrRunAsNonRoot, pod: fPodRunAsNonRoot, set: "true",
		caveat: " (the kubelet then refuses to start a container whose image runs as root: give it a non-root runAsUser)"},
}

// fixFor is the pod-level setting that fixes an uncovered finding, or nil:
// only a container that leaves the setting unset (no values) inherits it; a
// container that sets a bad value itself keeps it.
func fixFor(f *Finding) *podLevelFix {
	// An ephemeral container joins a running pod, whose security context
	// can no longer change: it must set the field itself.
	if f.Covered() || f.Scope != ScopeContainer || len(f.Values) > 0 || f.Kind() == policyv1alpha1.ContainerKindEphemeral {
		return nil
	}
	for i := range podLevelFixes {
		if fx := &podLevelFixes[i]; fx.control == f.Control && slices.Contains(fx.ctr[:], f.Field) {
			return fx
		}
	}
	return nil
}

// PodLevelFix is the sentence for one finding that a pod-level setting
// fixes (as in PodLevelFixes), or "".
func (f *Finding) PodLevelFix(o *Object) string {
	fx := fixFor(f)
	if fx == nil {
		return ""
	}
	return fmt.Sprintf("set %s%s: %s once for the pod: every container that sets none of its own inherits it, injected ones included%s", o.FieldPrefix, fx.pod, fx.set, fx.caveat)
}

// PodLevelFixes says, once per setting, which pod-level setting fixes the
// rule's uncovered container findings that leave it unset: "One pod-level
// setting fixes these 2 Seccomp violations: set
// spec.securityContext.seccompProfile.type: RuntimeDefault ...". Empty when
// none does.
func (res *RuleResult) PodLevelFixes(o *Object) []string {
	var out []string
	for i := range podLevelFixes {
		fx := &podLevelFixes[i]
		n := 0
		for j := range res.Findings {
			if fixFor(&res.Findings[j]) == fx {
				n++
			}
		}
		if n == 0 {
			continue
		}
		what := fmt.Sprintf("this %s violation", fx.control)
		if n > 1 {
			what = fmt.Sprintf("these %d %s violations", n, fx.control)
		}
		out = append(out, fmt.Sprintf("One pod-level setting fixes %s: set %s%s: %s; every container that sets none of its own inherits it, injected ones included%s.",
			what, o.FieldPrefix, fx.pod, fx.set, fx.caveat))
	}
	return out
}

// podLevelFixLines is PodLevelFixes as lines of a message, each after a
// newline.
func (res *RuleResult) podLevelFixLines(o *Object) string {
	fixes := res.PodLevelFixes(o)
	if len(fixes) == 0 {
		return ""
	}
	return "\n" + strings.Join(fixes, "\n")
}
