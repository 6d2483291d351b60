package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkWindowsHostProcess is upstream's windowsHostProcess check (policy/check_windowsHostProcess.go).
const checkWindowsHostProcess policy.CheckID = "windowsHostProcess"

func init() {
	addAttribution(checkWindowsHostProcess, attribution{
		control:   policyv1alpha1.ControlHostProcess,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributeWindowsHostProcess,
	})
}

func attributeWindowsHostProcess(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil &&
		sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
		a.pod(fPodHostProcess, []string{valueTrue})
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.WindowsOptions != nil &&
			sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
			a.ctr(k, c, fCtrHostProcess, []string{valueTrue})
		}
	}
	return a.out
}
