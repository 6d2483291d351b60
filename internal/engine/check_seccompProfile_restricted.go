package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkSeccompProfileRestricted is upstream's seccompProfile_restricted check (policy/check_seccompProfile_restricted.go).
const checkSeccompProfileRestricted policy.CheckID = "seccompProfile_restricted"

func init() {
	addAttribution(checkSeccompProfileRestricted, attribution{
		control:   policyv1alpha1.ControlSeccomp,
		revisions: []api.Version{api.MajorMinorVersion(1, 19), api.MajorMinorVersion(1, 25)},
		attribute: attributeSeccompProfileRestricted,
	})
}

func attributeSeccompProfileRestricted(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 19) || windowsExempt(v, spec) {
		return nil
	}
	podValid := false
	if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		if validSeccompType(sc.SeccompProfile.Type) {
			podValid = true
		} else {
			a.pod(fPodSeccompType, []string{string(sc.SeccompProfile.Type)})
		}
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
			if !validSeccompType(sc.SeccompProfile.Type) {
				a.ctr(k, c, fCtrSeccompType, []string{string(sc.SeccompProfile.Type)})
			}
		} else if !podValid {
			a.ctr(k, c, fCtrSeccompType, missing())
		}
	}
	return a.out
}
