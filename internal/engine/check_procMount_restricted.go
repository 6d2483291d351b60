package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkProcMountRestricted is upstream's procMount_restricted check (policy/check_procMount_restricted.go).
const checkProcMountRestricted policy.CheckID = "procMount_restricted"

func init() {
	addAttribution(checkProcMountRestricted, attribution{
		control:   policyv1alpha1.ControlProcMountType,
		revisions: []api.Version{api.MajorMinorVersion(1, 35)},
		attribute: attributeProcMountRestricted,
	})
}

// attributeProcMountRestricted is procMount's rule without the user namespace
// relaxation; see (*attributor).procMount.
func attributeProcMountRestricted(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 35) {
		return nil
	}
	a.procMount(spec)
	return a.out
}
