package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// baselineRule is the rules list most of the engine's tests need: one rule
// "r" that enforces the baseline level at the latest version. Prefix it
// with other spec fields ("exceptions: {}\n" + baselineRule). It is
// enginetest.BaselineRule, which the engine's own tests cannot import.
const baselineRule = "rules:\n- name: r\n  podSecurity: {level: baseline}"

// mustPolicy compiles a SecurityPolicy written as YAML (spec only).
func mustPolicy(tb testing.TB, name, spec string) *Policy {
	tb.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
		tb.Fatalf("policy %s: %v", name, err)
	}
	p, err := CompilePolicy(sp)
	if err != nil {
		tb.Fatalf("policy %s: %v", name, err)
	}
	return p
}

// mustException compiles a PolicyException written as YAML (spec only).
func mustException(tb testing.TB, namespace, name, spec string) *Exception {
	tb.Helper()
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := yaml.UnmarshalStrict([]byte(spec), &pe.Spec); err != nil {
		tb.Fatalf("exception %s: %v", name, err)
	}
	e, err := CompileException(pe, "podsieve-system")
	if err != nil {
		tb.Fatalf("exception %s: %v", name, err)
	}
	return e
}

func podObject(ns string, p *corev1.Pod) *Object {
	return &Object{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: p.Name, Labels: p.Labels, Meta: &p.ObjectMeta, Spec: &p.Spec}
}

func sc(mut func(*corev1.SecurityContext)) *corev1.SecurityContext {
	s := restrictedSC()
	mut(s)
	return s
}

func image(c corev1.Container, img string) corev1.Container {
	c.Image = img
	return c
}

// restrictedPod is compliant with restricted at every version.
func restrictedPod(opts ...podOpt) *corev1.Pod {
	base := []podOpt{withPodSC(&corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	})}
	return mkPod(append(base, opts...)...)
}

func addCaps(cs ...corev1.Capability) func(*corev1.SecurityContext) {
	return func(s *corev1.SecurityContext) { s.Capabilities.Add = cs }
}

// istioInit is Istio's init container: NET_ADMIN and NET_RAW, as root.
func istioInit() corev1.Container {
	return corev1.Container{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0", SecurityContext: &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(false),
		RunAsUser:                ptr.To[int64](0),
	}}
}
