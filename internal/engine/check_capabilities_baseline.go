package engine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkCapabilitiesBaseline is upstream's capabilities_baseline check (policy/check_capabilities_baseline.go).
const checkCapabilitiesBaseline policy.CheckID = "capabilities_baseline"

func init() {
	addAttribution(checkCapabilitiesBaseline, attribution{
		control:   policyv1alpha1.ControlCapabilities,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributeCapabilitiesBaseline,
	})
}

func attributeCapabilitiesBaseline(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	for k, c := range containers(spec) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			continue
		}
		bad := uniqueValues{most: len(c.SecurityContext.Capabilities.Add)}
		for _, capability := range c.SecurityContext.Capabilities.Add {
			if !baselineCapability(capability) {
				bad.add(string(capability))
			}
		}
		if bad.values != nil {
			a.ctr(k, c, fCtrCapAdd, bad.values)
		}
	}
	return a.out
}

// baselineCapabilities are the capabilities the baseline level lets a
// container add: upstream's capabilities_allowed_1_0. Upstream compares the
// strings as written: "CAP_CHOWN" or "chown" are not CHOWN.
var baselineCapabilities = [...]corev1.Capability{
	"AUDIT_WRITE",
	"CHOWN",
	"DAC_OVERRIDE",
	"FOWNER",
	"FSETID",
	"KILL",
	"MKNOD",
	"NET_BIND_SERVICE",
	"SETFCAP",
	"SETGID",
	"SETPCAP",
	"SETUID",
	"SYS_CHROOT",
}

func baselineCapability(c corev1.Capability) bool {
	return slices.Contains(baselineCapabilities[:], c)
}

// BaselineCapabilities are the capabilities the baseline level lets a
// container add, as upstream spells them. The slice is the caller's to keep.
func BaselineCapabilities() []string {
	out := make([]string, len(baselineCapabilities))
	for i, c := range baselineCapabilities {
		out[i] = string(c)
	}
	return out
}
