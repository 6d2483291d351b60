package engine

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkHostPorts is upstream's hostPorts check (policy/check_hostPorts.go).
const checkHostPorts policy.CheckID = "hostPorts"

func init() {
	addAttribution(checkHostPorts, attribution{
		control:   policyv1alpha1.ControlHostPorts,
		revisions: []api.Version{api.MajorMinorVersion(1, 0)},
		attribute: attributeHostPorts,
	})
}

func attributeHostPorts(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	for k, c := range containers(spec) {
		bad := uniqueValues{most: len(c.Ports)}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				bad.add(strconv.FormatInt(int64(p.HostPort), 10))
			}
		}
		if bad.values != nil {
			a.ctr(k, c, fCtrHostPort, bad.values)
		}
	}
	return a.out
}
