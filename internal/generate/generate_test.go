package generate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
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

func TestImageGlob(t *testing.T) {
	tests := []struct {
		name, image string
		anyTag      bool
		want        string
	}{
		{"as written", "docker.io/istio/proxyv2:1.24.0", false, "docker.io/istio/proxyv2:1.24.0"},
		{"familiar, qualified so its registry is pinned", "nginx:1.25", false, "docker.io/library/nginx:1.25"},
		{"any tag", "docker.io/istio/proxyv2:1.24.0", true, "docker.io/istio/proxyv2:*"},
		{"any tag of a familiar image", "nginx:1.25", true, "docker.io/library/nginx:*"},
		{"any tag of an untagged image", "nginx", true, "docker.io/library/nginx:*"},
		{"digest only", "quay.io/a/b@sha256:0123456789012345678901234567890123456789012345678901234567890123", true, "quay.io/a/b@*"},
		{"tag and digest", "quay.io/a/b:1@sha256:0123456789012345678901234567890123456789012345678901234567890123", true, "quay.io/a/b:*"},
		{"not a reference", "Not A Reference*", true, "Not A Reference?"},
		{"untagged, pinned to latest", "nginx", false, "docker.io/library/nginx:latest"},
		{"untagged with a registry port", "registry.example:5000/team/app", false, "registry.example:5000/team/app:latest"},
		{"digest only, as written", "quay.io/a/b@sha256:0123456789012345678901234567890123456789012345678901234567890123", false, "quay.io/a/b@sha256:0123456789012345678901234567890123456789012345678901234567890123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := imageGlob(tt.image, tt.anyTag)
			if got != tt.want {
				t.Fatalf("imageGlob = %q, want %q", got, tt.want)
			}
			// The glob matches the image it was written for.
			x, err := engine.CompileExclusion(policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", Images: []string{got}}, engine.Source{}, "e")
			if err != nil {
				t.Fatal(err)
			}
			v := engine.Violation{Control: "Capabilities", Scope: engine.ScopeContainer, Container: "c", Image: tt.image, Field: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}
			if why := x.WhyNot(&v); why != "" {
				t.Fatalf("the glob does not match its image: %s", why)
			}
			// Without --any-tag, it matches no other tag of the image.
			if !tt.anyTag {
				if named, err := reference.ParseNormalizedNamed(tt.image); err == nil {
					v.Image = named.Name() + ":1.0-debug"
					if x.WhyNot(&v) == "" {
						t.Fatalf("the glob %q also matches %s", got, v.Image)
					}
				}
			}
		})
	}
}

// TestMatch: a Pod's exception matches the Pod by name; a controller gets
// two, one for the controller by its exact name and kind, one for the
// objects it creates (name-*), so that neither reaches a sibling controller
// named name-x.
func TestMatch(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}}
	tests := []struct {
		name string
		obj  runtime.Object
		// want is, per exception, "names|kinds|suffix".
		want     []string
		selector bool
	}{
		{"pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"app": "x"}}}, []string{"x|Pod|"}, false},
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}, []string{"x|Deployment|", "x-*|ReplicaSet,Pod|-pods"}, true},
		{"cronjob", &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, []string{"x|CronJob|", "x-*|Job,Pod|-pods"}, true},
		{"daemonset", &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DaemonSetSpec{Template: tmpl}}, []string{"x|DaemonSet|", "x-*|Pod|-pods"}, true},
		{"statefulset without labels", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, []string{"x|StatefulSet|", "x-*|Pod|-pods"}, false},
		{"deployment with more labels than a selector may hold", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DeploymentSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: manyLabels(20)}}}}, []string{"x|Deployment|", "x-*|ReplicaSet,Pod|-pods"}, true},
		// Named by the API server (podsieve eval reads generateName as
		// <prefix><generated>): every name it may generate, never the
		// placeholder literally.
		{"pod the API server names", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + engine.GeneratedName}}, []string{"web-*|Pod|"}, false},
		{"job the API server names", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate-" + engine.GeneratedName}, Spec: batchv1.JobSpec{Template: tmpl}}, []string{"migrate-*|Job|", "migrate-*-*|Pod|-pods"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, m := range matchesFor(object(t, tt.obj)) {
				kinds := make([]string, len(m.match.Kinds))
				for i, k := range m.match.Kinds {
					kinds[i] = string(k)
				}
				got = append(got, strings.Join(m.match.Names, ",")+"|"+strings.Join(kinds, ",")+"|"+m.suffix)
				if (m.match.Selector != nil) != tt.selector {
					t.Errorf("selector %v", m.match.Selector)
				}
				if m.match.Selector != nil && len(m.match.Selector.MatchLabels) > engine.MaxSelectorRequirements {
					t.Errorf("selector of %d labels, more than an exception may hold", len(m.match.Selector.MatchLabels))
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("matches %q, want %q", got, tt.want)
			}
		})
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

func TestExceptionNames(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct {
		name, workload, flag string
		policies             []string
		want                 string
	}{
		{"default", "web", "", []string{"pss"}, "web-pss"},
		{"given", "web", "mine", []string{"pss"}, "mine"},
		{"given, two policies", "web", "mine", []string{"pss", "restricted"}, "mine-pss,mine-restricted"},
		{"too long", long, "", []string{"pss"}, long + "-ps"},
		{"too long, cut at the dash", long + "aa", "", []string{"pss"}, long + "aa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(exceptionNames(tt.workload, tt.flag, tt.policies, func(s string) string { return s }), ",")
			if got != tt.want {
				t.Errorf("names %q, want %q", got, tt.want)
			}
		})
	}
}

// TestUnwaivable: a failure without a field gets no entry, and a policy
// whose only failure it is gets no exception; covered violations and Audit
// rules are left alone.
func TestUnwaivable(t *testing.T) {
	enforce := policy(t, "exceptions: {}\nrules: [{name: r, podSecurity: {level: baseline}}]")
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

// TestNameGlob: an exception is named after the object and matches it by
// name; an object the API server names is matched by its prefix, and the
// exception's name is a valid object name.
func TestNameGlob(t *testing.T) {
	tests := []struct{ name, wantBase, wantGlob string }{
		{"web", "web", "web"},
		{"we*b", "we*b", "we?b"},
		{"web-" + engine.GeneratedName, "web", "web-*"},
		{"web." + engine.GeneratedName, "web", "web.*"},
		{"-" + engine.GeneratedName, "generated", "-*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, glob := nameGlob(&engine.Object{Name: tt.name})
			if base != tt.wantBase || glob != tt.wantGlob {
				t.Errorf("nameGlob(%q) = %q, %q; want %q, %q", tt.name, base, glob, tt.wantBase, tt.wantGlob)
			}
		})
	}
}

// manyLabels is n labels l00=v, l01=v, ...
func manyLabels(n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("l%02d", i)] = "v"
	}
	return out
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

// TestSelectorSurvivesUpgrades: the exceptions generated for a chart's
// Deployment leave out the labels a release or rollout changes, so that
// after a chart upgrade (new version labels, new image tag, with --any-tag)
// they still waive the Deployment and the pods its new ReplicaSet creates,
// and still nothing of another workload.
func TestSelectorSurvivesUpgrades(t *testing.T) {
	p := policy(t, `exceptions:
  controls:
  - {controlName: Capabilities, allowedValues: [NET_ADMIN]}
rules: [{name: baseline, podSecurity: {level: baseline}}]`)
	release := func(version, tag string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web",
					"app.kubernetes.io/version": version, "helm.sh/chart": "web-" + version,
				}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:" + tag, SecurityContext: caps("NET_ADMIN")}}},
			}}}
	}
	podOf := func(d *appsv1.Deployment, hash string) *corev1.Pod {
		labels := map[string]string{"pod-template-hash": hash}
		for k, v := range d.Spec.Template.Labels {
			labels[k] = v
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash + "-x7k2p", Namespace: "team-a", Labels: labels}, Spec: d.Spec.Template.Spec}
	}
	d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, release("1.2.0", "1.2.0")), nil, now, engine.Admission)
	plan, err := For(d, Options{Now: now, AnyTag: true, ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	var excs []*engine.Exception
	for _, ex := range plan.Exceptions {
		if sel := ex.Object.Spec.Match.Selector; sel == nil || len(sel.MatchLabels) != 2 {
			t.Errorf("exception %s: selector %v, want the two stable labels", ex.Object.Name, sel)
		}
		e, err := engine.CompileException(ex.Object, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		excs = append(excs, e)
	}
	upgraded := release("1.3.0", "1.3.0")
	other := release("1.3.0", "1.3.0")
	other.Spec.Template.Labels["app.kubernetes.io/name"] = "admin"
	tests := []struct {
		name    string
		obj     runtime.Object
		allowed bool
	}{
		{"the Deployment, upgraded", upgraded, true},
		{"a pod of its new ReplicaSet", podOf(upgraded, "5d8f7c9b6"), true},
		{"a pod of the release generated for", podOf(release("1.2.0", "1.2.0"), "7b9c5f4d8"), true},
		{"another workload of the same name pattern", podOf(other, "5d8f7c9b6"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(excs), object(t, tt.obj), nil, now, engine.Admission)
			if d.Allowed != tt.allowed {
				t.Errorf("allowed = %v, want %v: %+v", d.Allowed, tt.allowed, d.Results)
			}
		})
	}
}

// TestGenerateSplitsLargeWaivers: when the narrowest exception needs more
// than one PolicyException holds (here 20 image globs, over the 16 of the
// schema), generate writes several, each within the schema and named
// predictably, that together admit the workload; each alone does not, and
// one more violation is still refused.
func TestGenerateSplitsLargeWaivers(t *testing.T) {
	p := policy(t, `exceptions:
  controls:
  - {controlName: Capabilities, allowedValues: [NET_ADMIN, NET_RAW]}
rules: [{name: baseline, podSecurity: {level: baseline}}]`)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "team-a"}}
	for i := range 20 {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: fmt.Sprintf("registry.example/tool-%d:1", i), SecurityContext: caps("NET_ADMIN")})
	}
	d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, pod), nil, now, engine.Admission)
	plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var excs []*engine.Exception
	for _, ex := range plan.Exceptions {
		names = append(names, ex.Object.Name)
		if !ex.Permitted() {
			t.Errorf("%s refused: %v %v", ex.Object.Name, ex.Refused, ex.RefusedEntries)
		}
		images := 0
		for _, e := range ex.Object.Spec.PodSecurity {
			images += len(e.Images)
		}
		if len(ex.Object.Spec.PodSecurity) > engine.MaxExceptionEntries || images > engine.MaxExceptionImages {
			t.Errorf("%s: %d entries, %d image globs: more than one PolicyException holds", ex.Object.Name, len(ex.Object.Spec.PodSecurity), images)
		}
		if !slices.ContainsFunc(ex.Notes, func(n string) bool { return strings.Contains(n, "together waive") }) {
			t.Errorf("%s: notes %q do not say the parts are needed together", ex.Object.Name, ex.Notes)
		}
		e, err := engine.CompileException(ex.Object, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		excs = append(excs, e)
	}
	if want := []string{"agent-p", "agent-p-part-2"}; !slices.Equal(names, want) {
		t.Fatalf("exceptions %q, want %q", names, want)
	}
	decide := func(pod *corev1.Pod, excs ...*engine.Exception) bool {
		return engine.Decide([]*engine.Policy{p}, engine.AllExceptions(excs), object(t, pod), nil, now, engine.Admission).Allowed
	}
	if !decide(pod, excs...) {
		t.Error("refused with every part")
	}
	for i := range excs {
		if decide(pod, excs[i]) {
			t.Errorf("admitted with %s alone", names[i])
		}
	}
	more := pod.DeepCopy()
	more.Spec.Containers[19].SecurityContext = caps("NET_ADMIN", "NET_RAW")
	if decide(more, excs...) {
		t.Error("one more capability admitted")
	}
}

// TestSplitEntries: parts are filled in order up to each limit of one
// PolicyException, and entries are never merged.
func TestSplitEntries(t *testing.T) {
	entry := func(images, names, values int) policyv1alpha1.PodSecurityExclusion {
		var e policyv1alpha1.PodSecurityExclusion
		for i := range images {
			e.Images = append(e.Images, fmt.Sprintf("registry.example/i%d:*", i))
		}
		for i := range names {
			e.ContainerNames = append(e.ContainerNames, fmt.Sprintf("c%d", i))
		}
		for i := range values {
			e.Values = append(e.Values, fmt.Sprint(i))
		}
		return e
	}
	repeat := func(n int, e policyv1alpha1.PodSecurityExclusion) []policyv1alpha1.PodSecurityExclusion {
		out := make([]policyv1alpha1.PodSecurityExclusion, n)
		for i := range out {
			out[i] = e
		}
		return out
	}
	tests := []struct {
		name    string
		entries []policyv1alpha1.PodSecurityExclusion
		want    []int // entries per part
	}{
		{"fits", repeat(16, entry(1, 2, 4)), []int{16}},
		{"17 entries", repeat(17, entry(0, 0, 0)), []int{16, 1}},
		{"images", repeat(6, entry(3, 0, 0)), []int{5, 1}},
		{"container names", repeat(5, entry(0, 8, 0)), []int{4, 1}},
		{"an entry naming more containers than one may", repeat(1, entry(1, 20, 1)), []int{3}},
		{"an entry naming more containers and images than one may: every pairing of shares", repeat(1, entry(10, 9, 1)), []int{2, 2}},
		{"values", repeat(5, entry(0, 0, 16)), []int{4, 1}},
		{"40 entries", repeat(40, entry(0, 1, 1)), []int{16, 16, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// What the entries waive, as (container, image, value) triples:
			// the same before and after, so nothing is merged or widened.
			waived := func(entries []policyv1alpha1.PodSecurityExclusion) map[string]bool {
				out := map[string]bool{}
				for _, e := range entries {
					for _, n := range append([]string{"*"}, e.ContainerNames...) {
						for _, i := range append([]string{"*"}, e.Images...) {
							if (n == "*") != (len(e.ContainerNames) == 0) || (i == "*") != (len(e.Images) == 0) {
								continue
							}
							out[n+"|"+i+"|"+strings.Join(e.Values, ",")] = true
						}
					}
				}
				return out
			}
			fitted, _ := fitEntries(tt.entries, nil)
			var got []int
			var all []policyv1alpha1.PodSecurityExclusion
			for _, part := range splitEntries(fitted) {
				got = append(got, len(part))
				for _, e := range part {
					if len(e.ContainerNames) > engine.MaxEntryContainerNames || len(e.Images) > engine.MaxEntryImages {
						t.Errorf("an entry names %d containers and %d images", len(e.ContainerNames), len(e.Images))
					}
				}
				all = append(all, part...)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parts of %v entries, want %v", got, tt.want)
			}
			if w, g := waived(tt.entries), waived(all); !maps.Equal(w, g) {
				t.Errorf("the parts waive %d (container, image, values), the entries %d", len(g), len(w))
			}
		})
	}
}

// TestNoteWhenNoStableLabel: a controller whose pod template carries only
// release labels gets exceptions by name and kind alone, and a note says
// so; a Pod, matched by its name alone anyway, gets no such note.
func TestNoteWhenNoStableLabel(t *testing.T) {
	p := policy(t, "exceptions: {}\nrules: [{name: r, podSecurity: {level: baseline}}]")
	labels := map[string]string{"helm.sh/chart": "web-1.2.0", "app.kubernetes.io/version": "1.2.0"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1", SecurityContext: caps("NET_ADMIN")}}}
	tests := []struct {
		name string
		obj  runtime.Object
		note bool
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, true},
		{"pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Labels: labels}, Spec: spec}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, tt.obj), nil, now, engine.Admission)
			plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
			if err != nil || len(plan.Exceptions) == 0 {
				t.Fatalf("plan %+v, %v", plan, err)
			}
			for _, ex := range plan.Exceptions {
				if ex.Object.Spec.Match.Selector != nil {
					t.Errorf("%s: selector %v, want none (only release labels)", ex.Object.Name, ex.Object.Spec.Match.Selector)
				}
				noted := slices.ContainsFunc(ex.Notes, func(n string) bool { return strings.Contains(n, "another workload named web-* is covered too") })
				if noted != tt.note {
					t.Errorf("%s: notes %q, want the no-stable-label note: %v", ex.Object.Name, ex.Notes, tt.note)
				}
			}
		})
	}
}

// TestGenerateWithinTheSchema: a violation with more values than one entry
// may list (an entry covers a violation only with all its values) has no
// exception the schema allows, and generate says so rather than print one
// the API server would refuse; 16 values fit.
func TestGenerateWithinTheSchema(t *testing.T) {
	p := policy(t, "exceptions: {}\nrules: [{name: r, podSecurity: {level: baseline}}]")
	podAdding := func(n int) *corev1.Pod {
		var add []corev1.Capability
		for i := range n {
			add = append(add, corev1.Capability(fmt.Sprintf("CAP_%d", i)))
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "caps", Namespace: "team-a"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1", SecurityContext: caps(add...)}}}}
	}
	for _, tt := range []struct {
		name    string
		values  int
		wantErr string
	}{
		{"16 values fit one entry", 16, ""},
		{"17 values do not", 17, "Pod team-a/caps: no PolicyException the schema allows waives exactly this: spec.podSecurity[0].values: 17 values; an entry lists at most 16"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, podAdding(tt.values)), nil, now, engine.Admission)
			plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err %v, want %q (plan %d exceptions)", err, tt.wantErr, len(plan.Exceptions))
			}
			for _, ex := range plan.Exceptions {
				if err := engine.ExceptionEntriesFit(ex.Object.Spec.PodSecurity); err != nil {
					t.Errorf("%s: %v", ex.Object.Name, err)
				}
			}
		})
	}
}
