package generate

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
)

var now = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func policy(t *testing.T, spec string) *engine.Policy {
	t.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
		t.Fatal(err)
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func object(t *testing.T, obj runtime.Object) *engine.Object {
	t.Helper()
	o, err := engine.NewObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func caps(add ...corev1.Capability) *corev1.SecurityContext {
	return &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: add}}
}

// TestEntries: one entry per control, field, image and set of values; the
// containers that share them share the entry.
func TestEntries(t *testing.T) {
	p := policy(t, "exceptions: {}\nrules: [{name: baseline, podSecurity: {level: baseline}}]")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec: corev1.PodSpec{
			HostNetwork: true,
			Containers: []corev1.Container{
				{Name: "a", Image: "registry.example/tools:1", SecurityContext: caps("NET_ADMIN")},
				{Name: "b", Image: "registry.example/tools:1", SecurityContext: caps("NET_ADMIN")},
				{Name: "c", Image: "registry.example/other:1", SecurityContext: caps("NET_ADMIN")},
				{Name: "d", Image: "registry.example/tools:1", SecurityContext: caps("NET_ADMIN", "SYS_TIME")},
				{Name: "e", SecurityContext: caps("SYS_TIME")},
			},
		},
	}
	o := object(t, pod)
	d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), o, nil, now, engine.Admission)
	plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Exceptions) != 1 {
		t.Fatalf("%d exceptions, want 1", len(plan.Exceptions))
	}
	got := []string{}
	for _, e := range plan.Exceptions[0].Object.Spec.PodSecurity {
		got = append(got, string(e.ControlName)+"|"+strings.Join(e.ContainerNames, ",")+"|"+strings.Join(e.Images, ",")+"|"+e.RestrictedField+"|"+strings.Join(e.Values, ","))
	}
	// In the order of the findings: upstream's check order.
	want := []string{
		"Capabilities|a,b|registry.example/tools:1|spec.containers[*].securityContext.capabilities.add|NET_ADMIN",
		"Capabilities|c|registry.example/other:1|spec.containers[*].securityContext.capabilities.add|NET_ADMIN",
		"Capabilities|d|registry.example/tools:1|spec.containers[*].securityContext.capabilities.add|NET_ADMIN,SYS_TIME",
		"Capabilities|e||spec.containers[*].securityContext.capabilities.add|SYS_TIME",
		"Host Namespaces|||spec.hostNetwork|true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ex := plan.Exceptions[0]
	if ex.Object.Name != "web-p" || ex.Object.Namespace != "team-a" || !ex.Permitted() || len(ex.Waives) != 6 {
		t.Errorf("name %s/%s, permitted %v, %d waived", ex.Object.Namespace, ex.Object.Name, ex.Permitted(), len(ex.Waives))
	}
}

// TestMissingSettingNote: an entry written for a missing setting has no
// values, so it covers every value of its field; the generator says so on
// the entry, and only there.
func TestMissingSettingNote(t *testing.T) {
	p := policy(t, "exceptions: {}\nrules: [{name: restricted, podSecurity: {level: restricted}}]")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptrTo(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "a", Image: "registry.example/a:1", SecurityContext: &corev1.SecurityContext{
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
			}}},
		},
	}
	d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, pod), nil, now, engine.Admission)
	plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Exceptions) != 1 {
		t.Fatalf("%d exceptions, want 1", len(plan.Exceptions))
	}
	ex := plan.Exceptions[0]
	for i, e := range ex.Object.Spec.PodSecurity {
		note, noted := ex.EntryNotes[i]
		switch {
		case len(e.Values) == 0 && (!noted || !strings.Contains(note, "allowPrivilegeEscalation: true too")):
			t.Errorf("entry %s without values: note %q", e.RestrictedField, note)
		case len(e.Values) > 0 && noted:
			t.Errorf("entry %s with values %v has a note: %q", e.RestrictedField, e.Values, note)
		}
	}
	if len(ex.EntryNotes) != 1 {
		t.Errorf("%d entry notes, want 1 (allowPrivilegeEscalation): %v", len(ex.EntryNotes), ex.EntryNotes)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestUnwaivable: a failure without a field gets no entry, and a policy
// whose only failure it is gets no exception; covered violations and Audit
// rules are left alone.
func TestUnwaivable(t *testing.T) {
	enforce := policy(t, "exceptions: {}\n"+enginetest.BaselineRule)
	audit := policy(t, "exceptions: {}\naction: Audit\nrules: [{name: a, podSecurity: {level: baseline}}]")
	o := object(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}})
	d := engine.Decision{Object: o, Results: []engine.RuleResult{
		{Rule: enforce.Rules[0], Outcome: engine.Fail, Findings: []engine.Finding{
			{Violation: engine.Violation{Control: "Seccomp", CheckID: "seccompProfile_baseline", Scope: engine.ScopePod, Values: []string{}}, Detail: "something upstream said"},
			{Violation: engine.Violation{Control: "Host Namespaces", Scope: engine.ScopePod, Field: "spec.hostPID", Values: []string{"true"}}, ExemptedBy: []engine.Exemption{{Source: engine.PolicyRuleSource("p", "r")}}},
		}},
		{Rule: audit.Rules[0], Outcome: engine.Fail, Findings: []engine.Finding{
			{Violation: engine.Violation{Control: "Host Namespaces", Scope: engine.ScopePod, Field: "spec.hostIPC", Values: []string{"true"}}},
		}},
	}}
	plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Exceptions) != 0 || len(plan.Unwaivable) != 1 || !strings.Contains(plan.Unwaivable[0], "something upstream said") {
		t.Errorf("exceptions %d, unwaivable %q", len(plan.Exceptions), plan.Unwaivable)
	}
	if len(plan.NotWaived) != 1 || plan.NotWaived[0] != "p/a (Audit): 1 uncovered violation" {
		t.Errorf("not waived %q", plan.NotWaived)
	}
	plan, err = For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system", IncludeAudit: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Exceptions) != 1 || len(plan.Exceptions[0].Object.Spec.PodSecurity) != 1 || plan.Exceptions[0].Object.Spec.PodSecurity[0].RestrictedField != "spec.hostIPC" {
		t.Errorf("with IncludeAudit: %+v", plan.Exceptions)
	}
}

// TestGenerateWithinRegistriesAndKinds: under allowedRegistries and
// allowedContainerKinds, what exception generate writes for an init
// container of an allowed registry passes them (each entry names the
// container's kind and its image fully qualified, so a familiar image is
// read on Docker Hub), and what it writes for another registry, a native
// sidecar or an app container is an entry the guardrails refuse, saying
// why.
func TestGenerateWithinRegistriesAndKinds(t *testing.T) {
	p := policy(t, `exceptions:
  controls:
  - {controlName: Capabilities, allowedValues: [NET_ADMIN, NET_RAW], requireContainerNames: true, allowedRegistries: [docker.io/istio, gcr.io/istio-release], allowedContainerKinds: [Init]}
rules: [{name: baseline, podSecurity: {level: baseline}}]`)
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name      string
		image     string
		kind      string // init, sidecar or app
		anyTag    bool
		wantImage string
		refused   string // "" when permitted
	}{
		{"an init container of a familiar image", "istio/proxyv2:1.24.0", "init", false, "docker.io/istio/proxyv2:1.24.0", ""},
		{"an init container, any tag", "gcr.io/istio-release/proxyv2:1.24.0", "init", true, "gcr.io/istio-release/proxyv2:*", ""},
		{"an init container of another registry", "registry.attacker.example/istio/proxyv2:1.24.0", "init", false, "registry.attacker.example/istio/proxyv2:1.24.0",
			`spec.podSecurity[0].images[0]: "registry.attacker.example/istio/proxyv2:1.24.0" can match images outside the registries and path prefixes the policy allows`},
		{"a sibling of an allowed path", "gcr.io/istio-release-evil/proxyv2:1", "init", true, "gcr.io/istio-release-evil/proxyv2:*", `can match images outside`},
		{"a native sidecar", "docker.io/istio/proxyv2:1.24.0", "sidecar", false, "docker.io/istio/proxyv2:1.24.0",
			`spec.podSecurity[0].containerKinds[0]: Sidecar is not among the kinds of container policy "p" allows for control "Capabilities": "Init"`},
		{"an app container", "docker.io/istio/proxyv2:1.24.0", "app", false, "docker.io/istio/proxyv2:1.24.0", `spec.podSecurity[0].containerKinds[0]: App is not among the kinds`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := corev1.Container{Name: "istio-init", Image: tt.image, SecurityContext: caps("NET_ADMIN", "NET_RAW")}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}}
			switch tt.kind {
			case "app":
				pod.Spec.Containers = []corev1.Container{c}
			case "sidecar":
				c.RestartPolicy = &always
				fallthrough
			default:
				pod.Spec.InitContainers = []corev1.Container{c}
				pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx:1.25"}}
			}
			d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, pod), nil, now, engine.Admission)
			plan, err := For(d, Options{Now: now, AnyTag: tt.anyTag, ExceptionsNamespace: "podsieve-system"})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Exceptions) != 1 || len(plan.Exceptions[0].Object.Spec.PodSecurity) != 1 {
				t.Fatalf("plan %+v, want one exception of one entry", plan)
			}
			ex := plan.Exceptions[0]
			entry := ex.Object.Spec.PodSecurity[0]
			if len(entry.Images) != 1 || entry.Images[0] != tt.wantImage || len(entry.ContainerKinds) != 1 {
				t.Errorf("entry images %q, containerKinds %q; want [%q] and one kind", entry.Images, entry.ContainerKinds, tt.wantImage)
			}
			switch refusal := ex.RefusedEntries[0]; {
			case tt.refused == "" && !ex.Permitted():
				t.Errorf("refused: %v %v", ex.Refused, ex.RefusedEntries)
			case tt.refused != "" && !strings.Contains(refusal, tt.refused):
				t.Errorf("entry refused with %q, want it to contain %q", refusal, tt.refused)
			}
		})
	}
}
