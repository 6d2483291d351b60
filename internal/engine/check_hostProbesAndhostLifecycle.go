package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// checkHostProbesAndHostLifecycle is upstream's hostProbesAndHostLifecycle check (policy/check_hostProbesAndhostLifecycle.go).
const checkHostProbesAndHostLifecycle policy.CheckID = "hostProbesAndHostLifecycle"

func init() {
	addAttribution(checkHostProbesAndHostLifecycle, attribution{
		control:   policyv1alpha1.ControlHostProbesLifecycle,
		revisions: []api.Version{api.MajorMinorVersion(1, 34)},
		attribute: attributeHostProbesAndHostLifecycle,
	})
}

func attributeHostProbesAndHostLifecycle(a attributor, v api.Version, _ *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	if !since(v, 34) {
		return nil
	}
	for k, c := range containers(spec) {
		a.probeHosts(k, c, c.LivenessProbe, fCtrLivenessHTTP, fCtrLivenessTCP)
		a.probeHosts(k, c, c.ReadinessProbe, fCtrReadinessHTTP, fCtrReadinessTCP)
		a.probeHosts(k, c, c.StartupProbe, fCtrStartupHTTP, fCtrStartupTCP)
		if c.Lifecycle != nil {
			a.handlerHosts(k, c, c.Lifecycle.PostStart, fCtrPostStartHTTP, fCtrPostStartTCP)
			a.handlerHosts(k, c, c.Lifecycle.PreStop, fCtrPreStopHTTP, fCtrPreStopTCP)
		}
	}
	return a.out
}

func (a *attributor) probeHosts(k ctrKind, c *corev1.Container, p *corev1.Probe, httpField, tcpField ctrField) {
	if p == nil {
		return
	}
	a.hosts(k, c, p.HTTPGet, p.TCPSocket, httpField, tcpField)
}

func (a *attributor) handlerHosts(k ctrKind, c *corev1.Container, h *corev1.LifecycleHandler, httpField, tcpField ctrField) {
	if h == nil {
		return
	}
	a.hosts(k, c, h.HTTPGet, h.TCPSocket, httpField, tcpField)
}

func (a *attributor) hosts(k ctrKind, c *corev1.Container, http *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, httpField, tcpField ctrField) {
	if http != nil && http.Host != "" {
		a.ctr(k, c, httpField, []string{http.Host})
	}
	if tcp != nil && tcp.Host != "" {
		a.ctr(k, c, tcpField, []string{tcp.Host})
	}
}
