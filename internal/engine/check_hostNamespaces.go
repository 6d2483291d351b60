package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkHostNamespaces is upstream's hostNamespaces check (policy/check_hostNamespaces.go).
const checkHostNamespaces policy.CheckID = "hostNamespaces"

func init() {
	addAttribution(checkHostNamespaces, attribution{
		control:   policyv1alpha1.ControlHostNamespaces,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributeHostNamespaces,
	})
}

func attributeHostNamespaces(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	if spec.HostNetwork {
		a.pod(fHostNetwork, []string{valueTrue})
	}
	if spec.HostPID {
		a.pod(fHostPID, []string{valueTrue})
	}
	if spec.HostIPC {
		a.pod(fHostIPC, []string{valueTrue})
	}
	return a.out
}
