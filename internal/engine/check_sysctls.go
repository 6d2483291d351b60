package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkSysctls is upstream's sysctls check (policy/check_sysctls.go).
const checkSysctls policy.CheckID = "sysctls"

func init() {
	addAttribution(checkSysctls, attribution{
		control: policyv1alpha1.ControlSysctls,
		revisions: []api.Version{api.MajorMinorVersion(1, 0), api.MajorMinorVersion(1, 27), api.MajorMinorVersion(1, 29),
			api.MajorMinorVersion(1, 32), api.MajorMinorVersion(1, 37)},
		attribute: attributeSysctls,
	})
}

func attributeSysctls(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 0) || spec.SecurityContext == nil {
		return nil
	}
	bad := uniqueValues{most: len(spec.SecurityContext.Sysctls)}
	for _, s := range spec.SecurityContext.Sysctls {
		if !allowedSysctl(v, s.Name) {
			bad.add(s.Name)
		}
	}
	if bad.values != nil {
		a.pod(fSysctlName, bad.values)
	}
	return a.out
}

// allowedSysctl is the union of upstream's sysctlsAllowedV1Dot* sets, each
// name gated on the version that admitted it.
func allowedSysctl(v api.Version, name string) bool {
	switch name {
	case "kernel.shm_rmid_forced",
		"net.ipv4.ip_local_port_range",
		"net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range",
		"net.ipv4.ip_unprivileged_port_start":
		return true
	case "net.ipv4.ip_local_reserved_ports":
		return since(v, 27)
	case "net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout",
		"net.ipv4.tcp_keepalive_intvl",
		"net.ipv4.tcp_keepalive_probes":
		return since(v, 29)
	case "net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem":
		return since(v, 32)
	case "net.ipv4.tcp_slow_start_after_idle",
		"net.ipv4.tcp_notsent_lowat":
		return since(v, 37)
	}
	return false
}
