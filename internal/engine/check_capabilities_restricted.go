package engine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkCapabilitiesRestricted is upstream's capabilities_restricted check (policy/check_capabilities_restricted.go).
const checkCapabilitiesRestricted policy.CheckID = "capabilities_restricted"

func init() {
	addAttribution(checkCapabilitiesRestricted, attribution{
		control:   policyv1alpha1.ControlCapabilities,
		revisions: []api.Version{api.MajorMinorVersion(1, 22), api.MajorMinorVersion(1, 25)},
		attribute: attributeCapabilitiesRestricted,
	})
}

func attributeCapabilitiesRestricted(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 22) || windowsExempt(v, spec) {
		return nil
	}
	for k, c := range containers(spec) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			a.ctr(k, c, fCtrCapDrop, missing())
			continue
		}
		caps := c.SecurityContext.Capabilities
		// Upstream looks for the exact string "ALL"; "all" does not count.
		if !slices.Contains(caps.Drop, "ALL") {
			a.ctr(k, c, fCtrCapDrop, missing())
		}
		bad := uniqueValues{most: len(caps.Add)}
		for _, capability := range caps.Add {
			if capability != "NET_BIND_SERVICE" {
				bad.add(string(capability))
			}
		}
		if bad.values != nil {
			a.ctr(k, c, fCtrCapAdd, bad.values)
		}
	}
	return a.out
}
