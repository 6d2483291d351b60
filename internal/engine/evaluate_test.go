package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// meshPolicy is config/samples' mesh policy: each entry names the init
// container and pins the registry of the mesh's image.
const meshPolicy = `
rules:
- name: baseline-service-mesh
  podSecurity:
    level: baseline
    exclude:
    - controlName: Capabilities
      images: ["docker.io/istio/proxyv2", "gcr.io/istio-release/proxyv2"]
      containerNames: ["istio-init"]
      restrictedField: spec.initContainers[*].securityContext.capabilities.add
      values: ["NET_ADMIN", "NET_RAW"]
    - controlName: Capabilities
      images: ["cr.l5d.io/linkerd/proxy", "cr.l5d.io/linkerd/proxy-init"]
      containerNames: ["linkerd-init"]
      restrictedField: spec.initContainers[*].securityContext.capabilities.add
      values: ["NET_ADMIN", "NET_RAW"]
    - controlName: Capabilities
      images: ["docker.io/kumahq/kuma-init"]
      containerNames: ["kuma-init"]
      restrictedField: spec.initContainers[*].securityContext.capabilities.add
      values: ["NET_ADMIN", "NET_RAW"]
`

func TestEvaluateExemptions(t *testing.T) {
	type exc struct{ ns, name, spec string }
	tests := []struct {
		name       string
		policy     string
		exceptions []exc
		ns         string
		pod        *corev1.Pod
		want       Outcome
		// wantExempted maps "container/field" (or "pod/field") of each
		// finding to the sources that cover it; absent means uncovered.
		wantExempted map[string][]string
		// wantRefused are the exceptions reported as not applying.
		wantRefused []string
	}{
		{
			name:   "istio init container admitted by the policy exclusion",
			policy: meshPolicy,
			pod:    mkPod(withInit(istioInit()), withContainers(ctr("app", nil))),
			want:   Pass,
			wantExempted: map[string][]string{
				"istio-init/spec.initContainers[*].securityContext.capabilities.add": {"policy/p/baseline-service-mesh"},
			},
		},
		{
			name:   "linkerd init container admitted by the policy exclusion",
			policy: meshPolicy,
			pod: mkPod(withInit(image(ctr("linkerd-init", caps([]corev1.Capability{"NET_ADMIN", "NET_RAW"}, nil)), "cr.l5d.io/linkerd/proxy-init:v2.4.1")),
				withContainers(ctr("app", nil))),
			want: Pass,
		},
		{
			name:   "current linkerd-init, from the proxy image, admitted by the policy exclusion",
			policy: meshPolicy,
			pod: mkPod(withInit(image(ctr("linkerd-init", caps([]corev1.Capability{"NET_ADMIN", "NET_RAW"}, nil)), "cr.l5d.io/linkerd/proxy:edge-24.11.8")),
				withContainers(ctr("app", nil))),
			want: Pass,
		},
		{
			name:   "kuma-init admitted by the policy exclusion",
			policy: meshPolicy,
			pod: mkPod(withInit(image(ctr("kuma-init", caps([]corev1.Capability{"NET_ADMIN", "NET_RAW"}, nil)), "kumahq/kuma-init:2.9.1")),
				withContainers(ctr("app", nil))),
			want: Pass,
		},
		{
			name:   "the mesh image's path on another registry is refused",
			policy: meshPolicy,
			pod:    mkPod(withInit(image(istioInit(), "registry.attacker.example/istio/proxyv2:1.24.0"))),
			want:   Fail,
		},
		{
			name:   "a native sidecar of the mesh image is not covered by the init container's entry",
			policy: meshPolicy,
			pod: mkPod(withInit(istioInit(), func() corev1.Container {
				c := istioInit()
				c.Name, c.RestartPolicy = "istio-proxy", ptr.To(corev1.ContainerRestartPolicyAlways)
				return c
			}()), withContainers(ctr("app", nil))),
			want: Fail,
			wantExempted: map[string][]string{
				"istio-proxy/spec.initContainers[*].securityContext.capabilities.add": nil,
			},
		},
		{
			name:       "a Volume Types exception never covers a hostPath volume",
			policy:     "exceptions: {allowedControls: [Volume Types]}\nrules:\n- name: r\n  podSecurity: {level: restricted}",
			exceptions: []exc{{"staging", "volumes", "exceptions: [{policyName: p, ruleNames: [r]}]\npodSecurity: [{controlName: Volume Types}]"}},
			ns:         "staging",
			pod: restrictedPod(withContainers(ctr("app", restrictedSC())), withSpec(func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{
					{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
					{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}},
				}
			})),
			want: Fail,
			wantExempted: map[string][]string{
				"pod/spec.volumes[*].hostPath": nil,
				"pod/spec.volumes[*].nfs":      {"exception/staging/volumes"},
			},
		},
		{
			name:   "the same capabilities on the app container are refused",
			policy: meshPolicy,
			pod:    mkPod(withContainers(image(ctr("app", caps([]corev1.Capability{"NET_ADMIN"}, nil)), "docker.io/istio/proxyv2:1.24.0"))),
			want:   Fail,
		},
		{
			name:   "the same capabilities on an init container running another image are refused",
			policy: meshPolicy,
			pod:    mkPod(withInit(image(istioInit(), "registry.example/evil/proxyv2:1"))),
			want:   Fail,
		},
		{
			name:   "a capability outside the excluded values is refused",
			policy: meshPolicy,
			pod:    mkPod(withInit(image(ctr("istio-init", caps([]corev1.Capability{"NET_ADMIN", "SYS_ADMIN"}, nil)), "docker.io/istio/proxyv2:1.24.0"))),
			want:   Fail,
		},
		{
			// Kyverno removes one violating container per field for an
			// image-less exclusion; every container is covered here.
			name: "an image-less exclusion covers every container",
			policy: `
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Capabilities
      restrictedField: spec.containers[*].securityContext.capabilities.add
      values: ["NET_ADMIN"]`,
			pod:  mkPod(withContainers(ctr("a", caps([]corev1.Capability{"NET_ADMIN"}, nil)), ctr("b", caps([]corev1.Capability{"NET_ADMIN"}, nil)), ctr("c", caps([]corev1.Capability{"NET_ADMIN"}, nil)))),
			want: Pass,
		},
		{
			// Kyverno lets a values list match a violation where the field is
			// simply unset.
			name: "a values entry does not cover a missing setting",
			policy: `
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - controlName: Running as Non-root
      restrictedField: spec.containers[*].securityContext.runAsNonRoot
      values: ["false"]`,
			pod:  mkPod(withPodSC(&corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}), withContainers(ctr("app", restrictedSC()))),
			want: Fail,
		},
		{
			name: "an entry without values covers a missing setting",
			policy: `
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - controlName: Running as Non-root
      restrictedField: spec.containers[*].securityContext.runAsNonRoot`,
			pod:  mkPod(withPodSC(&corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}), withContainers(ctr("app", restrictedSC()))),
			want: Pass,
		},
		{
			// Kyverno runs checks added after the pinned version.
			name:   "a check added after the pinned version does not run (v1.33)",
			policy: "rules:\n- name: r\n  podSecurity: {level: baseline, version: v1.33}",
			pod: mkPod(withContainers(corev1.Container{Name: "app", Image: "app:1", LivenessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}}})),
			want: Pass,
		},
		{
			name:   "the same pod at latest fails the host probe check",
			policy: "rules:\n- name: r\n  podSecurity: {level: baseline, version: latest}",
			pod: mkPod(withContainers(corev1.Container{Name: "app", Image: "app:1", LivenessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}}})),
			want: Fail,
		},
		{
			// Kyverno runs every check at level privileged.
			name:   "privileged runs nothing",
			policy: "rules:\n- name: r\n  podSecurity: {level: privileged}",
			pod:    mkPod(withSpec(func(s *corev1.PodSpec) { s.HostNetwork = true }), withContainers(ctr("app", &corev1.SecurityContext{Privileged: ptr.To(true)}))),
			want:   Pass,
		},
		{
			// Kyverno ignores the upstream override, so HostPath Volumes
			// does not help at restricted.
			name: "a HostPath Volumes exclusion keeps working at restricted",
			policy: `
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - controlName: HostPath Volumes
      restrictedField: spec.volumes[*].hostPath
      values: ["/var/log", "/var/log/**"]`,
			pod: restrictedPod(withContainers(ctr("app", restrictedSC())), withSpec(func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/pods"}}}}
			})),
			want: Pass,
		},
		{
			name: "a HostPath Volumes exclusion does not cover other volume types at restricted",
			policy: `
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - controlName: HostPath Volumes`,
			pod: restrictedPod(withContainers(ctr("app", restrictedSC())), withSpec(func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}}}
			})),
			want: Fail,
		},
		{
			// Kyverno's images: [nginx] does not match nginx:1.25.
			name: "images: [nginx] matches nginx:1.25",
			policy: `
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Privileged Containers
      images: ["nginx"]`,
			pod:  mkPod(withContainers(image(ctr("web", &corev1.SecurityContext{Privileged: ptr.To(true)}), "nginx:1.25"))),
			want: Pass,
		},
		{
			name: "docker.io/library/nginx:* matches nginx:1.25",
			policy: `
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Privileged Containers
      images: ["docker.io/library/nginx:*"]`,
			pod:  mkPod(withContainers(image(ctr("web", &corev1.SecurityContext{Privileged: ptr.To(true)}), "nginx:1.25"))),
			want: Pass,
		},
		{
			name: "a glob does not cross a repository boundary",
			policy: `
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Privileged Containers
      images: ["registry.io/team*"]`,
			pod:  mkPod(withContainers(image(ctr("web", &corev1.SecurityContext{Privileged: ptr.To(true)}), "registry.io/team-evil/app:1"))),
			want: Fail,
		},
		{
			name: "an entry with images does not cover a pod-level violation",
			policy: `
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - controlName: Seccomp
      images: ["*"]`,
			pod: mkPod(withPodSC(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}), withContainers(ctr("app", restrictedSC()))),
			want: Fail,
		},
		{
			name: "containerNames limits the entry to those containers",
			policy: `
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Capabilities
      containerNames: ["istio-init"]`,
			pod:  mkPod(withInit(istioInit()), withContainers(ctr("app", caps([]corev1.Capability{"NET_ADMIN"}, nil)))),
			want: Fail,
			wantExempted: map[string][]string{
				"istio-init/spec.initContainers[*].securityContext.capabilities.add": {"policy/p/r"},
				"app/spec.containers[*].securityContext.capabilities.add":            nil,
			},
		},
		{
			// At restricted, CHOWN is not allowed although baseline allows
			// it: an entry written for NET_ADMIN does not cover it.
			name: "a baseline-written capability entry covers only its values at restricted",
			policy: `
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - controlName: Capabilities
      restrictedField: spec.containers[*].securityContext.capabilities.add
      values: ["NET_ADMIN"]`,
			pod:  restrictedPod(withContainers(ctr("app", sc(addCaps("NET_ADMIN", "CHOWN"))))),
			want: Fail,
		},
		{
			name:   "exceptions combine per violation: two exceptions each cover one container",
			policy: "exceptions: {}\n" + baselineRule,
			exceptions: []exc{
				{"staging", "for-a", "exceptions: [{policyName: p, ruleNames: [r]}]\npodSecurity: [{controlName: Capabilities, containerNames: [a]}]"},
				{"staging", "for-b", "exceptions: [{policyName: p, ruleNames: [r]}]\npodSecurity: [{controlName: Capabilities, containerNames: [b]}]"},
			},
			ns:   "staging",
			pod:  mkPod(withContainers(ctr("a", caps([]corev1.Capability{"NET_ADMIN"}, nil)), ctr("b", caps([]corev1.Capability{"SYS_ADMIN"}, nil)))),
			want: Pass,
			wantExempted: map[string][]string{
				"a/spec.containers[*].securityContext.capabilities.add": {"exception/staging/for-a"},
				"b/spec.containers[*].securityContext.capabilities.add": {"exception/staging/for-b"},
			},
		},
		{
			name:   "an exception covering one container does not skip the rule",
			policy: "exceptions: {}\n" + baselineRule,
			exceptions: []exc{
				{"staging", "for-a", "exceptions: [{policyName: p, ruleNames: [r]}]\npodSecurity: [{controlName: Capabilities, containerNames: [a]}]"},
			},
			ns:   "staging",
			pod:  mkPod(withContainers(ctr("a", caps([]corev1.Capability{"NET_ADMIN"}, nil)), ctr("b", caps([]corev1.Capability{"SYS_ADMIN"}, nil)))),
			want: Fail,
		},
		{
			name:       "an empty podSecurity waives the whole rule",
			policy:     "exceptions: {}\n" + baselineRule,
			exceptions: []exc{{"staging", "all", "exceptions: [{policyName: p, ruleNames: [\"*\"]}]"}},
			ns:         "staging",
			pod:        mkPod(withSpec(func(s *corev1.PodSpec) { s.HostPID = true }), withContainers(ctr("a", nil))),
			want:       Skip,
			wantExempted: map[string][]string{
				"pod/spec.hostPID": {"exception/staging/all"},
			},
		},
		{
			name:       "an exception in team-a never applies in team-b",
			policy:     baselineRule,
			exceptions: []exc{{"team-a", "all", "exceptions: [{policyName: p, ruleNames: [\"*\"]}]"}},
			ns:         "team-b",
			pod:        mkPod(withSpec(func(s *corev1.PodSpec) { s.HostPID = true }), withContainers(ctr("a", nil))),
			want:       Fail,
		},
		{
			name:       "an exception naming another rule does not apply",
			policy:     baselineRule,
			exceptions: []exc{{"staging", "other", "exceptions: [{policyName: p, ruleNames: [not-r]}]"}},
			ns:         "staging",
			pod:        mkPod(withSpec(func(s *corev1.PodSpec) { s.HostPID = true }), withContainers(ctr("a", nil))),
			want:       Fail,
		},
		{
			name:        "an expired exception does not apply",
			policy:      baselineRule,
			exceptions:  []exc{{"staging", "old", "exceptions: [{policyName: p, ruleNames: [r]}]\nexpiresAt: \"2026-01-01T00:00:00Z\""}},
			ns:          "staging",
			pod:         mkPod(withSpec(func(s *corev1.PodSpec) { s.HostPID = true }), withContainers(ctr("a", nil))),
			want:        Fail,
			wantRefused: []string{"exception/staging/old"},
		},
		{
			name:        "an exception the guardrails refuse does not apply",
			policy:      "exceptions: {allowedControls: [Capabilities]}\n" + baselineRule,
			exceptions:  []exc{{"staging", "ns", "exceptions: [{policyName: p, ruleNames: [r]}]\npodSecurity: [{controlName: Host Namespaces}]"}},
			ns:          "staging",
			pod:         mkPod(withSpec(func(s *corev1.PodSpec) { s.HostPID = true }), withContainers(ctr("a", nil))),
			want:        Fail,
			wantRefused: []string{"exception/staging/ns"},
		},
		{
			name:   "a Windows pod is exempt from restricted capabilities from v1.25",
			policy: "rules:\n- name: r\n  podSecurity: {level: restricted, version: v1.25}",
			pod: mkPod(windows, withPodSC(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}),
				withContainers(ctr("app", &corev1.SecurityContext{}))),
			want: Pass,
		},
		{
			name:   "the same Windows pod fails restricted at v1.24",
			policy: "rules:\n- name: r\n  podSecurity: {level: restricted, version: v1.24}",
			pod: mkPod(windows, withPodSC(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}),
				withContainers(ctr("app", &corev1.SecurityContext{}))),
			want: Fail,
		},
		{
			name: "an ephemeral container is judged like the others",
			policy: `
rules:
- name: r
  podSecurity:
    level: baseline
    exclude:
    - controlName: Privileged Containers
      restrictedField: spec.containers[*].securityContext.privileged`,
			pod:  mkPod(withContainers(ctr("app", nil)), withEphemeral(ctr("debugger", &corev1.SecurityContext{Privileged: ptr.To(true)}))),
			want: Fail,
			wantExempted: map[string][]string{
				"debugger/spec.ephemeralContainers[*].securityContext.privileged": nil,
			},
		},
	}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, "p", tt.policy)
			var excs []*Exception
			for _, e := range tt.exceptions {
				excs = append(excs, mustException(t, e.ns, e.name, e.spec))
			}
			ns := tt.ns
			if ns == "" {
				ns = "default"
			}
			tt.pod.Name = "web"
			d := Decide([]*Policy{p}, AllExceptions(excs), podObject(ns, tt.pod), nil, now, Admission)
			if len(d.Results) != 1 {
				t.Fatalf("got %d rule results, want 1", len(d.Results))
			}
			res := d.Results[0]
			if res.Outcome != tt.want {
				t.Fatalf("outcome %s, want %s; findings:\n%s", res.Outcome, tt.want, dumpFindings(res.Findings))
			}
			if d.Allowed != (tt.want != Fail) {
				t.Errorf("allowed %v with outcome %s under Enforce", d.Allowed, res.Outcome)
			}
			var refused []string
			for _, rf := range res.Refused {
				refused = append(refused, rf.Source.String())
				if msg := res.DenyMessage(d.Object); !strings.Contains(msg, rf.Source.String()+" does not apply: "+rf.Message) {
					t.Errorf("deny message does not say why %s does not apply:\n%s", rf.Source, msg)
				}
			}
			if !slices.Equal(refused, tt.wantRefused) {
				t.Errorf("refused %v, want %v", refused, tt.wantRefused)
			}
			for key, want := range tt.wantExempted {
				i := slices.IndexFunc(res.Findings, func(f Finding) bool { return findingKey(f) == key })
				if i < 0 {
					t.Errorf("no finding %s; findings:\n%s", key, dumpFindings(res.Findings))
					continue
				}
				if got := sourceStrings(res.Findings[i].ExemptingSources()); !slices.Equal(got, want) {
					t.Errorf("%s exempted by %v, want %v", key, got, want)
				}
			}
		})
	}
}

func findingKey(f Finding) string {
	if f.Scope == ScopePod {
		return "pod/" + f.Field
	}
	return f.Container + "/" + f.Field
}

func dumpFindings(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + findingKey(f) + " " + strings.Join(f.Values, ",") + " exemptedBy=" + JoinSources(f.ExemptingSources(), ",") + "\n")
	}
	return b.String()
}

// sourceStrings writes sources as podsieve prints them, for comparisons.
func sourceStrings(ss []Source) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.String()
	}
	return out
}

// TestExemptions: a rule's exclude.runtimeClassNames and exclude.usernames
// exempt as Pod Security Admission's exemptions do (either one suffices,
// the other exclude fields must match too), usernames at admission only.
func TestExemptions(t *testing.T) {
	p := mustPolicy(t, "p", `
rules:
- name: r
  exclude:
    namespaces: ["sandbox-*"]
    runtimeClassNames: [gvisor, kata]
    usernames: ["system:serviceaccount:ci:image-builder"]
  podSecurity: {level: baseline}
`)
	privileged := func(ns, runtimeClass, user string) *Object {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{HostPID: true,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
		if runtimeClass != "" {
			pod.Spec.RuntimeClassName = &runtimeClass
		}
		o := podObject(ns, pod)
		o.RequestUser = user
		return o
	}
	tests := []struct {
		name    string
		o       *Object
		applies bool
		why     string
	}{
		{"a sandboxed runtime in an exempt namespace", privileged("sandbox-1", "gvisor", "alice"), false, `exempts its runtimeClassName "gvisor"`},
		{"the exempt user in an exempt namespace", privileged("sandbox-1", "", "system:serviceaccount:ci:image-builder"), false, `exempts requests by "system:serviceaccount:ci:image-builder"`},
		{"another runtime class", privileged("sandbox-1", "runc", "alice"), true, ""},
		{"no requester (the background scan, eval)", privileged("sandbox-1", "", ""), true, ""},
		{"a sandboxed runtime elsewhere: exclude's namespaces must match too", privileged("prod", "gvisor", "alice"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := p.Rules[0]
			if got := r.Matches(tt.o, nil); got != tt.applies {
				t.Errorf("applies %v, want %v", got, tt.applies)
			}
			if why := r.WhyNotMatch(tt.o, nil); !strings.Contains(why, tt.why) || (tt.why == "") != (why == "") {
				t.Errorf("why not %q, want %q", why, tt.why)
			}
		})
	}
	t.Run("match cannot exempt", func(t *testing.T) {
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "m"}}
		sp.Spec.Rules = []policyv1alpha1.PolicyRule{{Name: "r", Match: &policyv1alpha1.ResourceFilter{RuntimeClassNames: []string{"gvisor"}},
			PodSecurity: policyv1alpha1.PodSecurity{Level: "baseline"}}}
		if _, err := CompilePolicy(sp); err == nil || !strings.Contains(err.Error(), "write them in exclude, not match") {
			t.Errorf("error %v", err)
		}
	})
}
