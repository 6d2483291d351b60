package engine

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// storedPolicy decodes a SecurityPolicy spec written as YAML, as the API
// server stores it: no compile on the way.
func storedPolicy(t *testing.T, spec string) *policyv1alpha1.SecurityPolicy {
	t.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "old", UID: "uid-old", Generation: 3}}
	if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
		t.Fatalf("spec: %v", err)
	}
	return sp
}

// upgradePod is the pod admitted after an upgrade when its policy stopped
// compiling: privileged, hostPID and hostNetwork; labels and a capability
// vary by case.
func upgradePod(ns string, labels map[string]string, adds ...corev1.Capability) *Object {
	sc := &corev1.SecurityContext{Privileged: ptr.To(true)}
	if len(adds) > 0 {
		sc = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: adds}}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Labels: labels}, Spec: corev1.PodSpec{
		HostPID: len(adds) == 0, HostNetwork: len(adds) == 0,
		Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1", SecurityContext: sc}},
	}}
	return podObject(ns, p)
}

// TestCompileStoredPolicy: each form an earlier podsieve stored (its schema
// and engine accepted it) and this one refuses is read at its strictest:
// CompilePolicy, the webhook's judge of new writes, still refuses it with
// the same message; CompileStoredPolicy enforces the rest, notes the field,
// and the part waives nothing and narrows nothing. The forms come from the
// history of api/v1alpha1, config/crd/bases and internal/engine/policy.go
// (docs/semantics.md lists them with the version that stopped them).
func TestCompileStoredPolicy(t *testing.T) {
	privileged := upgradePod("team", nil)
	netAdmin := upgradePod("team", nil, "NET_ADMIN")
	keepalive := podObject("team", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keepalive"}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.tcp_keepalive_time", Value: "60"}}},
		Containers:      []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}})
	type verdict struct {
		object  *Object
		allowed bool
	}
	for _, tt := range []struct {
		name string
		spec string
		// fields are the parts read strictly, in order.
		fields []string
		// problem is part of the first reading's message: what to write.
		problem  string
		verdicts []verdict
		// permits, when set, checks the guardrails' reading.
		exception   string
		permitError string
	}{
		{
			name: "images: [] in an entry waives nothing; the entries that compile still waive",
			spec: `rules:
- name: nodes
  podSecurity:
    level: baseline
    exclude:
    - {controlName: Privileged Containers, images: []}
    - {controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}`,
			fields:   []string{"spec.rules[0].podSecurity.exclude[0]"},
			problem:  "spec.rules[0].podSecurity.exclude[0].images: an empty list would match no image; remove the field to mean any image",
			verdicts: []verdict{{privileged, false}, {netAdmin, true}},
		},
		{
			name: "containerNames: [] in an entry waives nothing",
			spec: `rules:
- name: nodes
  podSecurity:
    level: baseline
    exclude:
    - {controlName: Privileged Containers, containerNames: []}`,
			fields:   []string{"spec.rules[0].podSecurity.exclude[0]"},
			problem:  "containerNames: an empty list would match no container; remove the field to mean any container",
			verdicts: []verdict{{privileged, false}},
		},
		{
			name: "values: [] in an entry waives nothing",
			spec: `rules:
- name: nodes
  podSecurity:
    level: baseline
    exclude:
    - {controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: []}`,
			fields:   []string{"spec.rules[0].podSecurity.exclude[0]"},
			problem:  "values: an empty list would match no value; remove the field to mean any value",
			verdicts: []verdict{{netAdmin, false}, {privileged, false}},
		},
		{
			name: "values that can never match their field waive nothing",
			spec: `rules:
- name: nodes
  podSecurity:
    level: baseline
    exclude:
    - {controlName: Host Namespaces, restrictedField: spec.hostNetwork, values: ["yes"]}
    - {controlName: Privileged Containers}`,
			fields:   []string{"spec.rules[0].podSecurity.exclude[0]"},
			problem:  `"yes" can never match field spec.hostNetwork`,
			verdicts: []verdict{{privileged, false}},
		},
		{
			name: "a restrictedField of another control waives nothing",
			spec: `rules:
- name: nodes
  podSecurity:
    level: baseline
    exclude:
    - {controlName: Capabilities, restrictedField: spec.hostPID}
    - {controlName: Privileged Containers}
    - {controlName: Host Namespaces, restrictedField: spec.hostNetwork}`,
			fields:   []string{"spec.rules[0].podSecurity.exclude[0]"},
			problem:  `"spec.hostPID" is not a field of control "Capabilities"`,
			verdicts: []verdict{{privileged, false}},
		},
		{
			name: "match.namespaces: [] applies the rule in every namespace",
			spec: `rules:
- name: nodes
  match: {namespaces: []}
  podSecurity: {level: baseline}`,
			fields:   []string{"spec.rules[0].match.namespaces"},
			problem:  "spec.rules[0].match.namespaces: an empty list would match no namespace; remove the field to mean any namespace",
			verdicts: []verdict{{privileged, false}, {upgradePod("kube-system", nil), false}},
		},
		{
			name: "a match selector that does not compile selects every object; the parts that compile still select",
			spec: `rules:
- name: nodes
  match:
    namespaces: [team]
    selector: {matchExpressions: [{key: app, operator: Matches, values: [agent]}]}
  podSecurity: {level: baseline}`,
			fields:   []string{"spec.rules[0].match.selector"},
			problem:  "spec.rules[0].match.selector: ",
			verdicts: []verdict{{privileged, false}, {upgradePod("other", nil), true}},
		},
		{
			name: "exclude.namespaces: [] removes no object from the rule",
			spec: `rules:
- name: nodes
  exclude: {namespaces: [], selector: {matchLabels: {app: agent}}}
  podSecurity: {level: baseline}`,
			fields:   []string{"spec.rules[0].exclude"},
			problem:  "spec.rules[0].exclude.namespaces: an empty list would match no namespace",
			verdicts: []verdict{{upgradePod("team", map[string]string{"app": "agent"}), false}, {privileged, false}},
		},
		{
			name: "an exclude selector that does not compile removes no object",
			spec: `rules:
- name: nodes
  exclude: {namespaces: [team], selector: {matchLabels: {"app": "not a label value!"}}}
  podSecurity: {level: baseline}`,
			fields:   []string{"spec.rules[0].exclude"},
			problem:  "spec.rules[0].exclude.selector: ",
			verdicts: []verdict{{privileged, false}},
		},
		{
			name: "runtimeClassNames: [] in exclude removes no object",
			spec: `rules:
- name: nodes
  exclude: {runtimeClassNames: []}
  podSecurity: {level: baseline}`,
			fields:   []string{"spec.rules[0].exclude"},
			problem:  "runtimeClassNames: an empty list would exempt nothing; remove the field",
			verdicts: []verdict{{privileged, false}},
		},
		{
			name: "a level that is not one is restricted, a version that is not one its leading v1.N",
			spec: `rules:
- name: nodes
  podSecurity: {level: strict, version: "1.30"}`,
			fields:   []string{"spec.rules[0].podSecurity.level", "spec.rules[0].podSecurity.version"},
			problem:  `spec.rules[0].podSecurity.level: "strict" is not a level; use privileged, baseline or restricted`,
			verdicts: []verdict{{privileged, false}, {netAdmin, false}},
		},
		{
			// Latest would admit the sysctl, which v1.26 refused: a
			// version is read as the minor it starts with, not as latest.
			name: "a version that is not one, with a leading minor, is that minor",
			spec: `rules:
- name: nodes
  podSecurity: {level: baseline, version: "v1.26.0"}`,
			fields:   []string{"spec.rules[0].podSecurity.version"},
			problem:  `spec.rules[0].podSecurity.version`,
			verdicts: []verdict{{keepalive, false}},
		},
		{
			name: "an action that is not one is Enforce",
			spec: `action: Block
rules:
- name: nodes
  podSecurity: {level: baseline}`,
			fields:   []string{"spec.action"},
			problem:  `spec.action: "Block" is not an action; use Enforce, Audit or Warn`,
			verdicts: []verdict{{privileged, false}},
		},
		{
			name: "a spec.exceptions.controls entry that does not compile lets no exception waive its control",
			spec: `exceptions:
  controls:
  - {controlName: Capabilities, allowedValues: []}
  - {controlName: Host Ports, allowedValues: ["9100"]}
rules:
- name: nodes
  podSecurity: {level: baseline}`,
			fields:      []string{"spec.exceptions.controls[0]"},
			problem:     "spec.exceptions.controls[0].allowedValues: an empty list would allow no value",
			verdicts:    []verdict{{netAdmin, false}},
			exception:   `{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}`,
			permitError: `remove control "Capabilities" from spec.podSecurity`,
		},
		{
			name: "spec.exceptions.controls: [] honours no exception",
			spec: `exceptions:
  allowedControls: [Capabilities]
  controls: []
rules:
- name: nodes
  podSecurity: {level: baseline}`,
			fields:      []string{"spec.exceptions"},
			problem:     "spec.exceptions.controls: an empty list bounds nothing",
			verdicts:    []verdict{{netAdmin, false}},
			exception:   `{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}`,
			permitError: "allows no exceptions",
		},
		{
			name: "an unknown control in allowedControls allows nothing",
			spec: `exceptions:
  allowedControls: [Capabilities, Privileged]
rules:
- name: nodes
  podSecurity: {level: baseline}`,
			fields:      []string{"spec.exceptions.allowedControls[1]"},
			problem:     `spec.exceptions.allowedControls[1]: unknown control "Privileged"`,
			verdicts:    []verdict{{privileged, false}},
			exception:   `{controlName: Privileged Containers}`,
			permitError: `allows exceptions only for controls "Capabilities"`,
		},
		{
			name:     "more entries than a rule may hold: those after the 64th waive nothing",
			spec:     "rules:\n- name: nodes\n  podSecurity:\n    level: baseline\n    exclude:\n" + strings.Repeat("    - {controlName: Seccomp}\n", MaxRuleEntries) + "    - {controlName: Privileged Containers}\n    - {controlName: Host Namespaces}\n",
			fields:   []string{"spec.rules[0].podSecurity.exclude"},
			problem:  "66 entries",
			verdicts: []verdict{{privileged, false}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sp := storedPolicy(t, tt.spec)
			_, writeErr := CompilePolicy(sp)
			if writeErr == nil {
				t.Fatal("CompilePolicy compiles it: a new write of this form would be admitted")
			}
			p, err := CompileStoredPolicy(sp)
			if err != nil {
				t.Fatalf("CompileStoredPolicy: %v", err)
			}
			var fields []string
			for _, s := range p.Strict {
				fields = append(fields, s.Field)
			}
			if fmt.Sprint(fields) != fmt.Sprint(tt.fields) {
				t.Errorf("read strictly: %v, want %v", fields, tt.fields)
			}
			if len(p.Strict) > 0 && !strings.Contains(p.Strict[0].Problem, tt.problem) {
				t.Errorf("first reading says %q, want it to contain %q", p.Strict[0].Problem, tt.problem)
			}
			if len(p.Strict) > 0 && p.Strict[0].Problem != writeErr.Error() {
				t.Errorf("first reading says %q; the webhook would say %q", p.Strict[0].Problem, writeErr)
			}
			if p.Name != "old" || p.UID != "uid-old" || p.Generation != 3 {
				t.Errorf("compiled as %s %s %d, want old uid-old 3", p.Name, p.UID, p.Generation)
			}
			for _, v := range tt.verdicts {
				d := Decide([]*Policy{p}, AllExceptions(nil), v.object, nil, benchNow, Admission)
				if d.Allowed != v.allowed {
					t.Errorf("%s/%s %v: allowed %v, want %v (%+v)", v.object.Namespace, v.object.Name, v.object.Labels, d.Allowed, v.allowed, d.Results)
				}
			}
			if tt.exception != "" {
				e := mustException(t, "team", "waiver", "exceptions: [{policyName: old, ruleNames: ['*']}]\npodSecurity: ["+tt.exception+"]")
				err := p.Permits(e, benchNow)
				if err == nil || !strings.Contains(err.Error(), tt.permitError) {
					t.Errorf("Permits: %v, want an error containing %q", err, tt.permitError)
				}
			}
		})
	}
}

// TestCompileStoredPolicyAsWritten: a policy that compiles is compiled
// exactly as CompilePolicy compiles it, with nothing read strictly; one
// that cannot be read even strictly fails with CompilePolicy's error.
func TestCompileStoredPolicyAsWritten(t *testing.T) {
	for _, tt := range []struct {
		name    string
		spec    string
		wantErr string
	}{
		{name: "a baseline policy with entries and guardrails", spec: `exceptions: {allowedControls: [Capabilities], controls: [{controlName: Capabilities, allowedValues: [NET_ADMIN]}]}
rules:
- name: a
  match: {namespaces: ["team-*"]}
  exclude: {runtimeClassNames: [gvisor]}
  podSecurity: {level: baseline, version: v1.30, exclude: [{controlName: Capabilities, images: ["docker.io/istio/proxyv2:*"]}]}`},
		{name: "no rules", spec: "rules: []", wantErr: "spec.rules: a policy needs at least one rule"},
		{name: "a rule name used twice", spec: "rules:\n- {name: a, podSecurity: {level: baseline}}\n- {name: a, podSecurity: {level: baseline, exclude: [{controlName: Seccomp, images: []}]}}",
			wantErr: `spec.rules[1].name: rule name "a" is used twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sp := storedPolicy(t, tt.spec)
			want, wantErr := CompilePolicy(sp)
			got, err := CompileStoredPolicy(sp)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CompileStoredPolicy: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if wantErr != nil || err != nil {
				t.Fatalf("CompilePolicy: %v; CompileStoredPolicy: %v", wantErr, err)
			}
			if got.Strict != nil {
				t.Errorf("read strictly: %v", got.Strict)
			}
			g, w := *got.Rules[0], *want.Rules[0]
			g.Policy, w.Policy = nil, nil
			if !reflect.DeepEqual(g, w) || got.Action != want.Action || !reflect.DeepEqual(got.limits, want.limits) || !reflect.DeepEqual(got.guardrails, want.guardrails) {
				t.Errorf("compiled differently:\n%+v\n%+v", g, w)
			}
		})
	}
}
