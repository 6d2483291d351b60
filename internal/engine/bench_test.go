package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
)

// Compare in one run, as ratios: the machine is shared and noisy.
//
//	go test ./internal/engine -run '^$' -bench 'BenchmarkPSA|BenchmarkEvaluate' -benchmem -count 6
//
// BenchmarkPSA is upstream's evaluator alone; BenchmarkEvaluate is podsieve's
// whole decision on the same pod: rule matching, exception selection with
// guardrails, the upstream checks, attribution of the failures and coverage
// by every entry. Target: Evaluate <= 3x PSA on each case.

type benchCase struct {
	name       string
	level      string
	pod        *corev1.Pod
	policy     string
	exceptions []string
}

func benchCases() []benchCase {
	istio := mkPod(withInit(istioInit()), withContainers(corev1.Container{Name: "app", Image: "registry.example/shop/web:2.1",
		SecurityContext: restrictedSC()}), withPodSC(&corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}))
	istioPolicy := `
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - {controlName: Capabilities, images: ["*/istio/proxyv2*"], restrictedField: "spec.initContainers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]}
    - {controlName: Host Ports, containerNames: [metrics], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}
    - {controlName: Sysctls, restrictedField: "spec.securityContext.sysctls[*].name", values: ["net.core.somaxconn"]}
`
	istioException := `
exceptions: [{policyName: p, ruleNames: [r]}]
match: {names: ["web*"]}
podSecurity:
- {controlName: Running as Non-root, containerNames: [istio-init], images: ["*/istio/proxyv2*"], restrictedField: "spec.initContainers[*].securityContext.runAsNonRoot", values: ["false"]}
- {controlName: Running as Non-root user, containerNames: [istio-init], images: ["*/istio/proxyv2*"], restrictedField: "spec.initContainers[*].securityContext.runAsUser", values: ["0"]}
- {controlName: Seccomp, containerNames: [istio-init]}
- {controlName: AppArmor, containerNames: [istio-init]}
- {controlName: Privilege Escalation, containerNames: [istio-init]}
`
	var many strings.Builder
	many.WriteString("rules:\n- name: r\n  podSecurity:\n    level: restricted\n    exclude:\n")
	for i := range 64 {
		fmt.Fprintf(&many, "    - {controlName: Capabilities, images: [\"registry.example/team-%d/*\"], restrictedField: \"spec.containers[*].securityContext.capabilities.add\", values: [NET_ADMIN]}\n", i)
	}
	bad := corev1.Container{Name: "bad", Image: "nginx:1.25", Ports: []corev1.ContainerPort{{HostPort: 80}},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN", "NET_ADMIN"}}}}
	manyViolations := mkPod(withSpec(func(s *corev1.PodSpec) {
		s.HostNetwork, s.HostPID = true, true
		s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	}), withContainers(bad, withName(bad, "bad2")), withInit(withName(bad, "init")))
	return []benchCase{
		{name: "minimal", level: "restricted", pod: restrictedPod(withContainers(ctr("app", restrictedSC()))),
			policy: "rules:\n- name: r\n  podSecurity: {level: restricted}"},
		{name: "istio", level: "restricted", pod: istio, policy: istioPolicy, exceptions: []string{istioException}},
		{name: "istio-64-entries", level: "restricted", pod: istio, policy: strings.Replace(many.String(), "    exclude:\n",
			"    exclude:\n    - {controlName: Capabilities, images: [\"*/istio/proxyv2*\"], restrictedField: \"spec.initContainers[*].securityContext.capabilities.add\", values: [NET_ADMIN, NET_RAW]}\n", 1),
			exceptions: []string{istioException}},
		{name: "many-violations", level: "restricted", pod: manyViolations, policy: "rules:\n- name: r\n  podSecurity: {level: restricted}"},
	}
}

func withName(c corev1.Container, name string) corev1.Container {
	c.Name = name
	return c
}

func BenchmarkPSA(b *testing.B) {
	upstream, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range benchCases() {
		lv := api.LevelVersion{Level: api.Level(bc.level), Version: api.LatestVersion()}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				policy.AggregateCheckResults(upstream.EvaluatePod(lv, &bc.pod.ObjectMeta, &bc.pod.Spec))
			}
		})
	}
}

// compile turns a case into what Decide takes.
func (bc benchCase) compile(tb testing.TB) (*Policy, []*Exception, *Object) {
	p := mustPolicy(tb, "p", bc.policy)
	var excs []*Exception
	for i, e := range bc.exceptions {
		excs = append(excs, mustException(tb, "staging", fmt.Sprintf("e%d", i), e))
	}
	bc.pod.Name = "web"
	return p, excs, podObject("staging", bc.pod)
}

var benchNow = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func BenchmarkEvaluate(b *testing.B) {
	for _, bc := range benchCases() {
		p, excs, o := bc.compile(b)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Decide([]*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
			}
		})
	}
}

// TestBenchCasesDecide keeps the benchmark honest: each case decides what it
// is meant to.
func TestBenchCasesDecide(t *testing.T) {
	want := map[string]bool{"minimal": true, "istio": true, "istio-64-entries": true, "many-violations": false}
	for _, bc := range benchCases() {
		p, excs, o := bc.compile(t)
		d := Decide([]*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
		if d.Allowed != want[bc.name] {
			t.Errorf("%s: allowed=%v, want %v; findings:\n%s", bc.name, d.Allowed, want[bc.name], dumpFindings(d.Results[0].Findings))
		}
	}
}
