package engine

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPodLevelFixes: a missing seccomp profile or runAsNonRoot in several
// containers is one pod-level setting, said once; a container that sets a
// bad value itself is not fixed by it.
func TestPodLevelFixes(t *testing.T) {
	p := mustPolicy(t, "p", "rules: [{name: r, podSecurity: {level: restricted}}]")
	hardened := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.example/" + name + ":1", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}
	}
	pod := func(mut func(*corev1.PodSpec)) *Object {
		spec := corev1.PodSpec{Containers: []corev1.Container{hardened("app")}, InitContainers: []corev1.Container{hardened("istio-init")}}
		if mut != nil {
			mut(&spec)
		}
		return podObject("ns", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: spec})
	}
	deployment := func() *Object {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
		d.Spec.Template.Spec.Containers = []corev1.Container{hardened("app"), hardened("sidecar")}
		o, err := NewObject(d)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tests := []struct {
		name string
		o    *Object
		want []string
	}{
		{"two containers without a profile or runAsNonRoot", pod(nil), []string{
			"One pod-level setting fixes these 2 Seccomp violations: set spec.securityContext.seccompProfile.type: RuntimeDefault",
			"One pod-level setting fixes these 2 Running as Non-root violations: set spec.securityContext.runAsNonRoot: true"}},
		{"an ephemeral container joins a running pod, whose security context is fixed", pod(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			for _, cs := range [][]corev1.Container{s.Containers, s.InitContainers} {
				for i := range cs {
					cs[i].SecurityContext.RunAsNonRoot, cs[i].SecurityContext.SeccompProfile = ptr.To(true), &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
				}
			}
			s.SecurityContext = nil
			s.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(hardened("debug"))}}
		}), nil},
		{"a Deployment's template", deployment(), []string{
			"set spec.template.spec.securityContext.seccompProfile.type: RuntimeDefault",
			"set spec.template.spec.securityContext.runAsNonRoot: true"}},
		{"a container that sets Unconfined itself keeps it", pod(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
			for _, cs := range [][]corev1.Container{s.Containers, s.InitContainers} {
				for i := range cs {
					cs[i].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
				}
			}
		}), nil},
		{"compliant at the pod level", pod(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := p.Rules[0].Evaluate(tt.o, nil)
			got := res.PodLevelFixes(tt.o)
			if len(got) != len(tt.want) {
				t.Fatalf("fixes %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("fix %q lacks %q", got[i], w)
				}
			}
			if len(tt.want) > 0 && !strings.Contains(res.DenyMessage(tt.o), got[0]) {
				t.Errorf("the denial does not say it:\n%s", res.DenyMessage(tt.o))
			}
			if len(tt.want) == 0 {
				return
			}
			// Doing what it says fixes what it says it fixes.
			if tt.o.Spec.SecurityContext == nil {
				tt.o.Spec.SecurityContext = &corev1.PodSecurityContext{}
			}
			tt.o.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			tt.o.Spec.SecurityContext.RunAsNonRoot = ptr.To(true)
			after := p.Rules[0].Evaluate(tt.o, nil)
			for i := range after.Findings {
				if c := after.Findings[i].Control; c == "Seccomp" || c == "Running as Non-root" {
					t.Errorf("after the pod-level settings, still %s", after.Findings[i].Describe(tt.o))
				}
			}
		})
	}
}
