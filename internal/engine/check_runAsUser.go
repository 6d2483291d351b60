package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkRunAsUser is upstream's runAsUser check (policy/check_runAsUser.go).
const checkRunAsUser policy.CheckID = "runAsUser"

func init() {
	addAttribution(checkRunAsUser, attribution{
		control:   policyv1alpha1.ControlRunningAsNonRootUser,
		revisions: []api.Version{api.MajorMinorVersion(1, 23), api.MajorMinorVersion(1, 35)},
		attribute: attributeRunAsUser,
	})
}

func attributeRunAsUser(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 23) || userNamespaceExempt(v, spec) {
		return nil
	}
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		a.pod(fPodRunAsUser, []string{"0"})
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			a.ctr(k, c, fCtrRunAsUser, []string{"0"})
		}
	}
	return a.out
}
