package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkPrivileged is upstream's privileged check (policy/check_privileged.go).
const checkPrivileged policy.CheckID = "privileged"

func init() {
	addAttribution(checkPrivileged, attribution{
		control:   policyv1alpha1.ControlPrivilegedContainers,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributePrivileged,
	})
}

func attributePrivileged(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
			a.ctr(k, c, fCtrPrivileged, []string{valueTrue})
		}
	}
	return a.out
}
