package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkRunAsNonRoot is upstream's runAsNonRoot check (policy/check_runAsNonRoot.go).
const checkRunAsNonRoot policy.CheckID = "runAsNonRoot"

func init() {
	addAttribution(checkRunAsNonRoot, attribution{
		control:   policyv1alpha1.ControlRunningAsNonRoot,
		revisions: []api.Version{api.MajorMinorVersion(1, 0), api.MajorMinorVersion(1, 35)},
		attribute: attributeRunAsNonRoot,
	})
}

func attributeRunAsNonRoot(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) || userNamespaceExempt(v, spec) {
		return nil
	}
	podTrue := false
	if sc := spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		if *sc.RunAsNonRoot {
			podTrue = true
		} else {
			a.pod(fPodRunAsNonRoot, []string{"false"})
		}
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
			if !*sc.RunAsNonRoot {
				a.ctr(k, c, fCtrRunAsNonRoot, []string{"false"})
			}
		} else if !podTrue {
			a.ctr(k, c, fCtrRunAsNonRoot, missing())
		}
	}
	return a.out
}
