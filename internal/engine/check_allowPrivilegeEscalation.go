package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkAllowPrivilegeEscalation is upstream's allowPrivilegeEscalation check (policy/check_allowPrivilegeEscalation.go).
const checkAllowPrivilegeEscalation policy.CheckID = "allowPrivilegeEscalation"

func init() {
	addAttribution(checkAllowPrivilegeEscalation, attribution{
		control:   policyv1alpha1.ControlPrivilegeEscalation,
		revisions: []api.Version{api.MajorMinorVersion(1, 8), api.MajorMinorVersion(1, 25)},
		attribute: attributeAllowPrivilegeEscalation,
	})
}

func attributeAllowPrivilegeEscalation(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 8) || windowsExempt(v, spec) {
		return nil
	}
	for k, c := range containers(spec) {
		sc := c.SecurityContext
		switch {
		case sc == nil || sc.AllowPrivilegeEscalation == nil:
			a.ctr(k, c, fCtrAllowPrivilegeEscalation, missing())
		case *sc.AllowPrivilegeEscalation:
			a.ctr(k, c, fCtrAllowPrivilegeEscalation, []string{valueTrue})
		}
	}
	return a.out
}
