package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkSELinuxOptions is upstream's seLinuxOptions check (policy/check_seLinuxOptions.go).
const checkSELinuxOptions policy.CheckID = "seLinuxOptions"

func init() {
	addAttribution(checkSELinuxOptions, attribution{
		control:   policyv1alpha1.ControlSELinux,
		revisions: []api.Version{api.MajorMinorVersion(1, 0), api.MajorMinorVersion(1, 31)},
		attribute: attributeSeLinuxOptions,
	})
}

func attributeSeLinuxOptions(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) {
		return nil
	}
	engineType := since(v, 31)
	allowedType := func(t string) bool {
		switch t {
		case "", "container_t", "container_init_t", "container_kvm_t":
			return true
		case "container_engine_t":
			return engineType
		}
		return false
	}
	if sc := spec.SecurityContext; sc != nil && sc.SELinuxOptions != nil {
		o := sc.SELinuxOptions
		if !allowedType(o.Type) {
			a.pod(fPodSELinuxType, []string{o.Type})
		}
		if o.User != "" {
			a.pod(fPodSELinuxUser, []string{o.User})
		}
		if o.Role != "" {
			a.pod(fPodSELinuxRole, []string{o.Role})
		}
	}
	for k, c := range containers(spec) {
		if c.SecurityContext == nil || c.SecurityContext.SELinuxOptions == nil {
			continue
		}
		o := c.SecurityContext.SELinuxOptions
		if !allowedType(o.Type) {
			a.ctr(k, c, fCtrSELinuxType, []string{o.Type})
		}
		if o.User != "" {
			a.ctr(k, c, fCtrSELinuxUser, []string{o.User})
		}
		if o.Role != "" {
			a.ctr(k, c, fCtrSELinuxRole, []string{o.Role})
		}
	}
	return a.out
}
