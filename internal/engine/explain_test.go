package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// TestWhyNotAgreesWithCovers: WhyNot is "" exactly when covers is true, for
// every entry against every violation, and otherwise names the field that
// differs.
func TestWhyNotAgreesWithCovers(t *testing.T) {
	const (
		initAdd = "spec.initContainers[*].securityContext.capabilities.add"
		ctrAdd  = "spec.containers[*].securityContext.capabilities.add"
	)
	violations := map[string]Violation{
		"istio-init adds": {Control: policyv1alpha1.ControlCapabilities, CheckID: "capabilities_baseline", Scope: ScopeContainer, Container: "istio-init",
			ContainerType: InitContainers, Image: "docker.io/istio/proxyv2:1.24.0", Field: initAdd, Values: []string{"NET_ADMIN", "NET_RAW"}},
		"app adds": {Control: policyv1alpha1.ControlCapabilities, CheckID: "capabilities_baseline", Scope: ScopeContainer, Container: "app",
			ContainerType: Containers, Image: "nginx:1.25", Field: ctrAdd, Values: []string{"NET_ADMIN"}},
		"drop missing": {Control: policyv1alpha1.ControlCapabilities, CheckID: "capabilities_restricted", Scope: ScopeContainer, Container: "app",
			ContainerType: Containers, Image: "nginx:1.25", Field: "spec.containers[*].securityContext.capabilities.drop", Values: []string{}},
		"host network":        {Control: policyv1alpha1.ControlHostNamespaces, CheckID: "hostNamespaces", Scope: ScopePod, Field: "spec.hostNetwork", Values: []string{"true"}},
		"restricted hostPath": {Control: policyv1alpha1.ControlVolumeTypes, CheckID: "restrictedVolumes", Scope: ScopePod, Field: "spec.volumes[*].hostPath", Values: []string{"/var/log"}},
		"pod runAsNonRoot":    {Control: policyv1alpha1.ControlRunningAsNonRoot, CheckID: "runAsNonRoot", Scope: ScopePod, Field: "spec.securityContext.runAsNonRoot", Values: []string{}},
	}
	tests := []struct {
		name    string
		entry   policyv1alpha1.PodSecurityExclusion
		covers  []string          // the violations it covers
		reasons map[string]string // a substring of WhyNot for some others
	}{
		{name: "mesh exclusion", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", Images: []string{"*/istio/proxyv2*"}, RestrictedField: initAdd, Values: []string{"NET_ADMIN", "NET_RAW"}},
			covers: []string{"istio-init adds"},
			reasons: map[string]string{
				"app adds":     "its restrictedField is " + initAdd + ", not " + ctrAdd,
				"host network": `its controlName is "Capabilities", not "Host Namespaces"`,
			}},
		{name: "one value short", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", RestrictedField: initAdd, Values: []string{"NET_ADMIN"}},
			reasons: map[string]string{"istio-init adds": `its values "NET_ADMIN" do not match "NET_RAW"`}},
		{name: "other image", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", Images: []string{"registry.example/*"}},
			reasons: map[string]string{"istio-init adds": `its images "registry.example/*" do not match image "docker.io/istio/proxyv2:1.24.0"`}},
		{name: "other container", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", ContainerNames: []string{"istio-*"}},
			covers:  []string{"istio-init adds"},
			reasons: map[string]string{"app adds": `its containerNames "istio-*" do not match container "app"`}},
		{name: "values on a missing setting", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", RestrictedField: "spec.containers[*].securityContext.capabilities.drop", Values: []string{"ALL"}},
			reasons: map[string]string{"drop missing": "the violation is a missing setting"}},
		{name: "whole control", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities"},
			covers: []string{"istio-init adds", "app adds", "drop missing"}},
		{name: "hostPath at restricted", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/*"}},
			covers: []string{"restricted hostPath"}},
		{name: "containers on a pod field", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Running as Non-root", ContainerNames: []string{"app"}},
			reasons: map[string]string{"pod runAsNonRoot": "it selects containers by name, and the violation is in a pod-level field"}},
		{name: "images on a pod field", entry: policyv1alpha1.PodSecurityExclusion{ControlName: "Running as Non-root", Images: []string{"nginx"}},
			reasons: map[string]string{"pod runAsNonRoot": "it selects containers by image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := CompileExclusion(tt.entry, PolicyRuleSource("p", "r"), "e")
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range violations {
				covers := x.covers(&v)
				why := x.WhyNot(&v)
				if covers != (why == "") {
					t.Errorf("%s: covers %v but WhyNot %q", name, covers, why)
				}
				if want := containsName(tt.covers, name); covers != want {
					t.Errorf("%s: covers %v, want %v", name, covers, want)
				}
				if sub, ok := tt.reasons[name]; ok && !strings.Contains(why, sub) {
					t.Errorf("%s: WhyNot %q lacks %q", name, why, sub)
				}
				if x.SameControl(&v) != (v.Control == x.control || (name == "restricted hostPath" && x.control == policyv1alpha1.ControlHostPathVolumes)) {
					t.Errorf("%s: SameControl %v", name, x.SameControl(&v))
				}
			}
		})
	}
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// TestValueGlob: the glob compiles as an entry's value for its field and
// matches the value; it is the value itself when the value can be spelled.
func TestValueGlob(t *testing.T) {
	tests := []struct {
		name, field, value string
		want               string
		exact              bool
	}{
		{"capability", "spec.containers[*].securityContext.capabilities.add", "NET_ADMIN", "NET_ADMIN", true},
		{"capability with a dash", "spec.containers[*].securityContext.capabilities.add", "NET-ADMIN", "NET?ADMIN", false},
		{"capability with a slash", "spec.containers[*].securityContext.capabilities.add", "A/B", "A**B", false},
		{"port", "spec.containers[*].ports[*].hostPort", "9100", "9100", true},
		{"boolean", "spec.hostNetwork", "true", "true", true},
		{"root", "spec.initContainers[*].securityContext.runAsUser", "0", "0", true},
		{"path", "spec.volumes[*].hostPath", "/var/log", "/var/log", true},
		{"path with a star", "spec.volumes[*].hostPath", "/data/*", "/data/?", false},
		{"path with brackets", "spec.volumes[*].hostPath", `/data/[x]\y`, "/data/?x??y", false},
		{"sysctl", "spec.securityContext.sysctls[*].name", "net.ipv4.ip_forward", "net.ipv4.ip_forward", true},
		{"apparmor", "spec.securityContext.appArmorProfile.type", "Unconfined", "Unconfined", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, exact := ValueGlob(tt.field, tt.value)
			if got != tt.want || exact != tt.exact {
				t.Fatalf("ValueGlob = %q, %v; want %q, %v", got, exact, tt.want, tt.exact)
			}
			var control policyv1alpha1.ControlName
			for _, c := range policyv1alpha1.Controls {
				if containsName(FieldsOf(c), tt.field) {
					control = c
				}
			}
			x, err := CompileExclusion(policyv1alpha1.PodSecurityExclusion{ControlName: control, RestrictedField: tt.field, Values: []string{got}}, PolicyRuleSource("p", "r"), "e")
			if err != nil {
				t.Fatalf("the glob does not compile as a value: %v", err)
			}
			v := Violation{Control: control, Scope: ScopePod, Field: tt.field, Values: []string{tt.value}}
			if why := x.WhyNot(&v); why != "" {
				t.Fatalf("the glob does not match the value: %s", why)
			}
		})
	}
}

// TestWhyNotMatch: a rule or exception that does not reach an object says
// which part of its filter decides, and says nothing when it does reach it.
func TestWhyNotMatch(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}}}
	o := podObject("staging", pod)
	ns := map[string]string{"kubernetes.io/metadata.name": "staging"}
	rules := []struct {
		name, spec, want string
	}{
		{"applies", "rules: [{name: r, podSecurity: {level: baseline}}]", ""},
		{"other namespaces", "rules: [{name: r, match: {namespaces: [prod-*]}, podSecurity: {level: baseline}}]", `match.namespaces "prod-*" do not match namespace "staging"`},
		{"namespace labels", "rules: [{name: r, match: {namespaceSelector: {matchLabels: {profile: restricted}}}, podSecurity: {level: baseline}}]",
			`match.namespaceSelector "profile=restricted" does not match the labels of namespace "staging" (kubernetes.io/metadata.name=staging)`},
		{"pod labels", "rules: [{name: r, match: {selector: {matchLabels: {app: db}}}, podSecurity: {level: baseline}}]", `match.selector "app=db" does not match the object's pod labels (app=web)`},
		{"excluded", "rules: [{name: r, exclude: {namespaces: [staging]}, podSecurity: {level: baseline}}]", "its exclude selects the object"},
	}
	for _, tt := range rules {
		t.Run("rule/"+tt.name, func(t *testing.T) {
			r := mustPolicy(t, "p", tt.spec).Rules[0]
			got := r.WhyNotMatch(o, ns)
			if got != tt.want {
				t.Errorf("WhyNotMatch = %q, want %q", got, tt.want)
			}
			if r.Matches(o, ns) != (got == "") {
				t.Errorf("Matches %v disagrees with %q", r.Matches(o, ns), got)
			}
		})
	}
	exceptions := []struct {
		name, namespace, spec, wantScope, wantMatch string
	}{
		{"applies", "staging", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {names: [web-*], kinds: [Pod]}", "", ""},
		{"other namespace", "prod", "exceptions: [{policyName: p, ruleNames: ['*']}]", `it is in namespace "prod", and an exception applies only in its own namespace`, ""},
		{"other namespace and name", "prod", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {names: [db-*]}", `it is in namespace "prod"`, `its match.names "db-*" do not match "web-1"`},
		{"other name", "staging", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {names: [db-*]}", "", `its match.names "db-*" do not match "web-1"`},
		{"other kind", "staging", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {kinds: [Deployment]}", "", `its match.kinds "Deployment" do not include Pod`},
		{"cluster-wide, other namespaces", "podsieve-system", "exceptions: [{policyName: p, ruleNames: ['*']}]\nmatch: {namespaces: [prod]}", "", `its match.namespaces "prod" do not match namespace "staging"`},
	}
	for _, tt := range exceptions {
		t.Run("exception/"+tt.name, func(t *testing.T) {
			e := mustException(t, tt.namespace, "e", tt.spec)
			scope, match := e.WhyNotMatch(o, ns)
			if !strings.HasPrefix(scope, tt.wantScope) || (scope == "") != (tt.wantScope == "") || match != tt.wantMatch {
				t.Errorf("WhyNotMatch = %q, %q; want %q, %q", scope, match, tt.wantScope, tt.wantMatch)
			}
			if e.Matches(o, ns) != (scope == "" && match == "") {
				t.Errorf("Matches %v disagrees with %q, %q", e.Matches(o, ns), scope, match)
			}
		})
	}
}

// TestNoteUnreached: a refusal names the exceptions of the namespace that
// would waive one of its violations but do not reach the object, with why;
// not those that reach it, nor those whose entries would not help.
func TestNoteUnreached(t *testing.T) {
	p := mustPolicy(t, "p", "exceptions: {allowedControls: [Capabilities]}\nrules: [{name: r, podSecurity: {level: baseline}}]")
	const netAdmin = `podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]`
	exception := func(name, match, entries string) *Exception {
		return mustException(t, "team-a", name, "exceptions: [{policyName: p, ruleNames: [r]}]\nmatch: "+match+"\n"+entries)
	}
	stale := exception("web-old", "{selector: {matchLabels: {app.kubernetes.io/version: 1.2.0}}}", netAdmin)
	renamed := exception("web-v1", "{names: [web-v1]}", netAdmin)
	unhelpful := exception("web-time", "{names: [web-v1]}", `podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [SYS_TIME]}]`)
	other := mustPolicy(t, "other", "exceptions: {}\nrules: [{name: r, podSecurity: {level: baseline}}]")
	elsewhere := mustException(t, "team-a", "other-policy", "exceptions: [{policyName: other, ruleNames: [r]}]\nmatch: {names: [web-v1]}\n"+netAdmin)
	clusterWide := mustException(t, "podsieve-system", "mesh", "exceptions: [{policyName: p, ruleNames: [r]}]\nmatch: {namespaces: [team-a], names: [web-v1]}\n"+netAdmin)
	strict := mustPolicy(t, "p", "exceptions: {allowedControls: [Capabilities], requireJustification: true}\nrules: [{name: r, podSecurity: {level: baseline}}]")
	unjustified := renamed
	var many []*Exception
	for i := range 100 {
		many = append(many, exception(fmt.Sprintf("m%02d", i), "{names: [web-v1]}", netAdmin))
	}
	pod := mkPod(withContainers(ctr("app", caps([]corev1.Capability{"NET_ADMIN"}, nil))))
	pod.Name, pod.Labels = "web", map[string]string{"app.kubernetes.io/version": "1.3.0"}
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		excs []*Exception
		cost int64    // what handing over each costs
		want []string // sources named, in order
	}{
		{"none in the namespace", nil, 0, nil},
		{"a selector the upgrade changed, and a name the workload no longer has", []*Exception{stale, renamed}, 0, []string{"exception/team-a/web-old", "exception/team-a/web-v1"}},
		{"entries that would not help", []*Exception{unhelpful}, 0, nil},
		{"another policy's", []*Exception{elsewhere}, 0, nil},
		{"a cluster exception of another namespace", []*Exception{clusterWide}, 0, nil},
		{"one the guardrails refuse", []*Exception{unjustified}, 0, nil},
		{"at most four of many", many, 0, []string{"exception/team-a/m00", "exception/team-a/m01", "exception/team-a/m02", "exception/team-a/m03"}},
		{"handing them over is charged: the budget pays for one", many, unreachedSteps * 3 / 5, []string{"exception/team-a/m00"}},
		{"handing one over costs more than the budget", many, unreachedSteps + 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := p
			if tt.name == "one the guardrails refuse" {
				policy = strict
			}
			d := Decide([]*Policy{policy, other}, AllExceptions(nil), podObject("team-a", pod), nil, now, Admission)
			d.NoteUnreached(func(yield func(*Exception, int64) bool) {
				for _, e := range tt.excs {
					if !yield(e, tt.cost) {
						return
					}
				}
			}, nil, now)
			var got []string
			for _, u := range d.Results[0].Unreached {
				got = append(got, u.Exception.Source.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("unreached %q, want %q", got, tt.want)
			}
			msg := d.Results[0].DenyMessage(d.Object)
			for _, src := range tt.want {
				if !strings.Contains(msg, src+" would waive a violation here but does not reach this object: its match.") {
					t.Errorf("the refusal does not name %s:\n%s", src, msg)
				}
			}
			// Nothing of the exceptions' patterns, nor of the object's
			// labels: the requester may only create pods.
			if strings.Contains(msg, "1.2.0") || strings.Contains(msg, "1.3.0") || strings.Contains(msg, "web-v1\"") {
				t.Errorf("the refusal discloses patterns or labels:\n%s", msg)
			}
		})
	}
}
