package engine

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

func TestCompileExclusionErrors(t *testing.T) {
	const caps = "spec.initContainers[*].securityContext.capabilities.add"
	tests := []struct {
		name    string
		entry   policyv1alpha1.PodSecurityExclusion
		wantErr string // "" when the entry compiles
	}{
		{"a capability entry", policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", RestrictedField: caps, Values: []string{"NET_ADMIN", "NET_*"}}, ""},
		{"unknown control", policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilites"}, `e.controlName: unknown control "Capabilites"; use one of "HostProcess"`},
		{"field of another control", policyv1alpha1.PodSecurityExclusion{ControlName: "Host Ports", RestrictedField: "spec.hostPID"},
			`e.restrictedField: "spec.hostPID" is not a field of control "Host Ports"; use one of spec.containers[*].ports[*].hostPort`},
		{"values without a field", policyv1alpha1.PodSecurityExclusion{ControlName: "Host Ports", Values: []string{"9100"}}, "e.values: values requires restrictedField"},
		{"containers on a pod-level control", policyv1alpha1.PodSecurityExclusion{ControlName: "Host Namespaces", ContainerNames: []string{"a"}}, `control "Host Namespaces" has only pod-level fields`},
		{"a port that is not a number", policyv1alpha1.PodSecurityExclusion{ControlName: "Host Ports", RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"9100", "http"}},
			`e.values[1]: "http" can never match field spec.containers[*].ports[*].hostPort, whose values are numbers`},
		{"a port glob", policyv1alpha1.PodSecurityExclusion{ControlName: "Host Ports", RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"91??"}}, ""},
		{"a boolean spelled yes", policyv1alpha1.PodSecurityExclusion{ControlName: "Host Namespaces", RestrictedField: "spec.hostNetwork", Values: []string{"yes"}},
			`e.values[0]: "yes" can never match field spec.hostNetwork, whose values are "true" or "false"`},
		{"a capability with a space", policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", RestrictedField: caps, Values: []string{"NET ADMIN"}},
			`"NET ADMIN" can never match field ` + caps + `, whose values are capability names`},
		{"a root user", policyv1alpha1.PodSecurityExclusion{ControlName: "Running as Non-root user", RestrictedField: "spec.initContainers[*].securityContext.runAsUser", Values: []string{"0"}}, ""},
		{"a hostPath path is free text", policyv1alpha1.PodSecurityExclusion{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log/**"}}, ""},
		{"a bad glob", policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", Images: []string{"nginx[1]"}}, "e.images[0]: glob \"nginx[1]\""},
		{"Kyverno's AppArmor annotation spelling", policyv1alpha1.PodSecurityExclusion{ControlName: "AppArmor",
			RestrictedField: "metadata.annotations[container.apparmor.security.beta.kubernetes.io/nginx]", Values: []string{"unconfined"}},
			`that is Kyverno's spelling: write restrictedField: metadata.annotations["container.apparmor.security.beta.kubernetes.io/*"] with containerNames: ["nginx"], so that the entry stays with that container`},
		{"Kyverno's AppArmor field without a key", policyv1alpha1.PodSecurityExclusion{ControlName: "AppArmor", RestrictedField: "metadata.annotations"},
			`for the AppArmor annotations write restrictedField: metadata.annotations["container.apparmor.security.beta.kubernetes.io/*"] with containerNames: [<container>]`},
		{"Kyverno's pod seccomp annotation spelling", policyv1alpha1.PodSecurityExclusion{ControlName: "Seccomp",
			RestrictedField: "metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]"},
			`that is Kyverno's spelling: write restrictedField: metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"]`},
		{"Kyverno's container seccomp annotation spelling", policyv1alpha1.PodSecurityExclusion{ControlName: "Seccomp",
			RestrictedField: "metadata.annotations[container.seccomp.security.alpha.kubernetes.io/app]"},
			`with containerNames: ["app"]`},
		{"podsieve's AppArmor annotation field", policyv1alpha1.PodSecurityExclusion{ControlName: "AppArmor",
			RestrictedField: `metadata.annotations["container.apparmor.security.beta.kubernetes.io/*"]`, ContainerNames: []string{"nginx"}, Values: []string{"unconfined"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileExclusion(tt.entry, PolicyRuleSource("p", "r"), "e")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("no error, want %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q lacks %q", err, tt.wantErr)
			}
		})
	}
}

// TestWhyNotAll: every field of an entry that misses a violation is named,
// each judged as Evaluate judges it, with the ** hint where * stops at /.
func TestWhyNotAll(t *testing.T) {
	const caps = "spec.initContainers[*].securityContext.capabilities.add"
	hostPath := Violation{Control: "HostPath Volumes", CheckID: "hostPathVolumes", Scope: ScopePod, Field: "spec.volumes[*].hostPath", Values: []string{"/var/log/pods"}}
	app := Violation{Control: "Capabilities", CheckID: "capabilities_baseline", Scope: ScopeContainer, Container: "app", ContainerType: Containers,
		Image: "registry.example/web:1", Field: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}
	tests := []struct {
		name  string
		entry policyv1alpha1.PodSecurityExclusion
		v     Violation
		want  []string
	}{
		{"covers", policyv1alpha1.PodSecurityExclusion{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log/**"}}, hostPath, nil},
		{"* stops at /", policyv1alpha1.PodSecurityExclusion{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log*"}}, hostPath,
			[]string{`its values "/var/log*" do not match "/var/log/pods"; * does not cross "/": write "/var/log/**" to match the paths below it`}},
		{"a value with no hint", policyv1alpha1.PodSecurityExclusion{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/etc"}}, hostPath,
			[]string{`its values "/etc" do not match "/var/log/pods"`}},
		{"every field that misses", policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", RestrictedField: caps, ContainerNames: []string{"istio-init"},
			Images: []string{"docker.io/istio/proxyv2"}, Values: []string{"NET_RAW"}}, app, []string{
			"its restrictedField is " + caps + ", not spec.containers[*].securityContext.capabilities.add",
			`its containerNames "istio-init" do not match container "app"`,
			`its values "NET_RAW" do not match "NET_ADMIN"`,
			`its images "docker.io/istio/proxyv2" do not match image "registry.example/web:1"`}},
		{"another control: one reason", policyv1alpha1.PodSecurityExclusion{ControlName: "Host Ports"}, app, []string{`its controlName is "Host Ports", not "Capabilities"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := CompileExclusion(tt.entry, PolicyRuleSource("p", "r"), "e")
			if err != nil {
				t.Fatal(err)
			}
			got := x.WhyNotAll(&tt.v)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if (len(got) == 0) != (x.WhyNot(&tt.v) == "") {
				t.Errorf("WhyNotAll %q disagrees with WhyNot %q", got, x.WhyNot(&tt.v))
			}
		})
	}
}

// TestContainerKinds: a native sidecar (an init container with
// restartPolicy: Always) is named a sidecar container, and an entry limited
// to Init covers the init container but not the long-running proxy of the
// same image on the same field.
func TestContainerKinds(t *testing.T) {
	p := mustPolicy(t, "p", `
exceptions: {}
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Capabilities
      containerKinds: [Init]
      images: ["docker.io/istio/proxyv2"]
      restrictedField: spec.initContainers[*].securityContext.capabilities.add
      values: [NET_ADMIN, NET_RAW]
`)
	always := corev1.ContainerRestartPolicyAlways
	caps := &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0", SecurityContext: caps},
			{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.24.0", SecurityContext: caps, RestartPolicy: &always},
		},
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1"}},
	}}
	o := podObject("ns", pod)
	res := p.Rules[0].Evaluate(o, nil)
	if res.Outcome != Fail || len(res.Findings) != 2 {
		t.Fatalf("outcome %v, findings %+v", res.Outcome, res.Findings)
	}
	init, proxy := &res.Findings[0], &res.Findings[1]
	if !init.Covered() || init.Kind() != policyv1alpha1.ContainerKindInit {
		t.Errorf("istio-init: covered %v, kind %q", init.Covered(), init.Kind())
	}
	if proxy.Covered() || proxy.Kind() != policyv1alpha1.ContainerKindSidecar {
		t.Errorf("istio-proxy: covered %v, kind %q", proxy.Covered(), proxy.Kind())
	}
	if d := proxy.Describe(o); !strings.HasPrefix(d, `Capabilities: sidecar container "istio-proxy"`) {
		t.Errorf("described as %q", d)
	}
	x := p.Rules[0].Exclusions()[0]
	if got := x.WhyNotAll(&proxy.Violation); len(got) != 1 || got[0] != `its containerKinds "Init" do not include Sidecar, the kind of sidecar container "istio-proxy"` {
		t.Errorf("why not %q", got)
	}
	t.Run("refused where no container can be", func(t *testing.T) {
		for _, e := range []policyv1alpha1.PodSecurityExclusion{
			{ControlName: "Host Namespaces", ContainerKinds: []policyv1alpha1.ContainerKind{"Init"}},
			{ControlName: "Capabilities", ContainerKinds: []policyv1alpha1.ContainerKind{}},
			{ControlName: "Capabilities", ContainerKinds: []policyv1alpha1.ContainerKind{"Job"}},
		} {
			if _, err := CompileExclusion(e, PolicyRuleSource("p", "r"), "e"); err == nil {
				t.Errorf("%+v compiled", e)
			}
		}
	})
}
