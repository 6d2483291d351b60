package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkHostPathVolumes is upstream's hostPathVolumes check (policy/check_hostPathVolumes.go).
const checkHostPathVolumes policy.CheckID = "hostPathVolumes"

func init() {
	addAttribution(checkHostPathVolumes, attribution{
		control:   policyv1alpha1.ControlHostPathVolumes,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributeHostPathVolumes,
	})
}

func attributeHostPathVolumes(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	paths := uniqueValues{most: len(spec.Volumes)}
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			paths.add(hp.Path)
		}
	}
	if paths.values != nil {
		a.pod(fHostPathVolume, paths.values)
	}
	return a.out
}
