package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkProcMount is upstream's procMount check (policy/check_procMount_baseline.go).
const checkProcMount policy.CheckID = "procMount"

func init() {
	addAttribution(checkProcMount, attribution{
		control:   policyv1alpha1.ControlProcMountType,
		revisions: []api.Version{api.MajorMinorVersion(1, 0), api.MajorMinorVersion(1, 35)},
		attribute: attributeProcMount,
	})
}

func attributeProcMount(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) || userNamespaceExempt(v, spec) {
		return nil
	}
	a.procMount(spec)
	return a.out
}

// procMount serves both procMount checks: they share upstream's procMount_1_0
// and differ only in whether v1.35 relaxes it for user-namespaced pods
// (baseline) and in when they start to apply.
func (a *attributor) procMount(spec *corev1.PodSpec) {
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			a.ctr(k, c, fCtrProcMount, []string{string(*sc.ProcMount)})
		}
	}
}
