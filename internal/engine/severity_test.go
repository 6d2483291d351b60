package engine

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// TestCompileReporting: a rule's severity, category and controlSeverities
// compile, or are refused with the field named, as the schema refuses them;
// a stored policy with one that does not compile keeps the defaults.
func TestCompileReporting(t *testing.T) {
	for _, tt := range []struct {
		name, rule string
		err        string // "" compiles
	}{
		{name: "nothing set", rule: `{podSecurity: {level: baseline}}`},
		{name: "severity and category", rule: `{podSecurity: {level: baseline}, severity: critical, category: "Host Isolation (CIS 5.2)"}`},
		{name: "every severity", rule: `{podSecurity: {level: baseline}, controlSeverities: [{controlName: HostProcess, severity: critical}, {controlName: Host Namespaces, severity: high}, {controlName: Capabilities, severity: medium}, {controlName: Seccomp, severity: low}, {controlName: Sysctls, severity: info}]}`},
		{name: "a control's category", rule: `{podSecurity: {level: restricted}, controlSeverities: [{controlName: Privileged Containers, severity: critical, category: Privilege}]}`},
		{name: "not a severity", rule: `{podSecurity: {level: baseline}, severity: urgent}`,
			err: `spec.rules[0].severity: "urgent" is not a severity; use one of critical, high, medium, low, info`},
		{name: "severity in capitals", rule: `{podSecurity: {level: baseline}, severity: Critical}`,
			err: `spec.rules[0].severity: "Critical" is not a severity`},
		{name: "category too long", rule: `{podSecurity: {level: baseline}, category: "` + strings.Repeat("a", 65) + `"}`,
			err: `spec.rules[0].category: "aaaa`},
		{name: "category with a newline", rule: `{podSecurity: {level: baseline}, category: "Host\nIsolation"}`,
			err: `spec.rules[0].category: "Host\nIsolation" is not a category`},
		{name: "an empty severity", rule: `{podSecurity: {level: baseline}, severity: ""}`,
			err: `spec.rules[0].severity: "" is not a severity`},
		{name: "an empty category", rule: `{podSecurity: {level: baseline}, category: ""}`,
			err: `spec.rules[0].category: "" is not a category`},
		{name: "category ending in a space", rule: `{podSecurity: {level: baseline}, category: "Host "}`,
			err: `spec.rules[0].category: "Host " is not a category`},
		{name: "empty controlSeverities", rule: `{podSecurity: {level: baseline}, controlSeverities: []}`,
			err: `spec.rules[0].controlSeverities: an empty list sets nothing`},
		{name: "unknown control", rule: `{podSecurity: {level: baseline}, controlSeverities: [{controlName: Privileged, severity: critical}]}`,
			err: `spec.rules[0].controlSeverities[0].controlName: "Privileged" is not a Pod Security Standards control`},
		{name: "control listed twice", rule: `{podSecurity: {level: baseline}, controlSeverities: [{controlName: Seccomp, severity: low}, {controlName: Seccomp, severity: high}]}`,
			err: `spec.rules[0].controlSeverities[1].controlName: "Seccomp" is listed twice`},
		{name: "control without a severity", rule: `{podSecurity: {level: baseline}, controlSeverities: [{controlName: Seccomp}]}`,
			err: `spec.rules[0].controlSeverities[0].severity: required`},
		{name: "control's severity not one", rule: `{podSecurity: {level: baseline}, controlSeverities: [{controlName: Seccomp, severity: none}]}`,
			err: `spec.rules[0].controlSeverities[0].severity: "none" is not a severity`},
		{name: "control's category not one", rule: `{podSecurity: {level: baseline}, controlSeverities: [{controlName: Seccomp, severity: low, category: "-x"}]}`,
			err: `spec.rules[0].controlSeverities[0].category: "-x" is not a category`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sp := storedPolicy(t, "rules: [{name: r, "+strings.TrimPrefix(tt.rule, "{")+"]\n")
			p, err := CompilePolicy(sp)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("got %v (policy %v), want an error containing %q", err, p, tt.err)
			}
			stored, err := CompileStoredPolicy(sp)
			if err != nil {
				t.Fatalf("stored: %v", err)
			}
			r := stored.Rules[0]
			if len(stored.Strict) != 1 || !strings.Contains(stored.Strict[0].Problem, tt.err) ||
				r.Severity() != policyv1alpha1.SeverityHigh || r.Category() != "Pod Security Standards (Baseline)" ||
				r.ControlSeverity(policyv1alpha1.ControlSeccomp) != policyv1alpha1.SeverityHigh {
				t.Errorf("stored: strict %v, severity %q, category %q; want the problem noted and the defaults", stored.Strict, r.Severity(), r.Category())
			}
		})
	}
}

// TestReporting: which severity and category a rule's result gets.
func TestReporting(t *testing.T) {
	pod := func(mut func(*corev1.Pod)) *Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
		mut(p)
		return podObject("team", p)
	}
	privileged := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	hostPID := func(p *corev1.Pod) { p.Spec.HostPID = true }
	both := func(p *corev1.Pod) { privileged(p); hostPID(p) }
	clean := func(*corev1.Pod) {}
	const controls = "\n  controlSeverities:\n  - {controlName: Privileged Containers, severity: critical, category: Privilege}\n  - {controlName: Host Namespaces, severity: low}"
	for _, tt := range []struct {
		name, rule   string
		object       *Object
		severity     policyv1alpha1.Severity
		category     string
		ruleSeverity policyv1alpha1.Severity
	}{
		{name: "baseline default", rule: "podSecurity: {level: baseline}", object: pod(privileged),
			severity: "high", category: "Pod Security Standards (Baseline)", ruleSeverity: "high"},
		{name: "restricted default", rule: "podSecurity: {level: restricted}", object: pod(privileged),
			severity: "medium", category: "Pod Security Standards (Restricted)", ruleSeverity: "medium"},
		{name: "privileged default", rule: "podSecurity: {level: privileged}", object: pod(privileged),
			severity: "medium", category: "Pod Security Standards (Privileged)", ruleSeverity: "medium"},
		{name: "the rule's own", rule: "podSecurity: {level: restricted}\n  severity: low\n  category: Hardening", object: pod(privileged),
			severity: "low", category: "Hardening", ruleSeverity: "low"},
		{name: "a control's severity and category", rule: "podSecurity: {level: baseline}" + controls, object: pod(privileged),
			severity: "critical", category: "Privilege", ruleSeverity: "high"},
		{name: "a control lower than the rule, with the rule's category", rule: "podSecurity: {level: baseline}\n  category: Host" + controls, object: pod(hostPID),
			severity: "low", category: "Host", ruleSeverity: "high"},
		{name: "the highest of the uncovered controls", rule: "podSecurity: {level: baseline}" + controls, object: pod(both),
			severity: "critical", category: "Privilege", ruleSeverity: "high"},
		{name: "a control without an entry takes the rule's", rule: "podSecurity: {level: baseline}\n  severity: medium\n  controlSeverities: [{controlName: Host Namespaces, severity: low}]", object: pod(both),
			severity: "medium", category: "Pod Security Standards (Baseline)", ruleSeverity: "medium"},
		{name: "a covered violation does not count", rule: "podSecurity:\n    level: baseline\n    exclude: [{controlName: Privileged Containers}]" + controls, object: pod(both),
			severity: "low", category: "Pod Security Standards (Baseline)", ruleSeverity: "high"},
		{name: "only covered violations: the rule's", rule: "podSecurity:\n    level: baseline\n    exclude: [{controlName: Privileged Containers}]" + controls, object: pod(privileged),
			severity: "high", category: "Pod Security Standards (Baseline)", ruleSeverity: "high"},
		{name: "a pass: the rule's", rule: "podSecurity: {level: baseline}\n  severity: info" + controls, object: pod(clean),
			severity: "info", category: "Pod Security Standards (Baseline)", ruleSeverity: "info"},
		{name: "a tie goes to the first control in the standard's order", rule: "podSecurity: {level: baseline}\n  controlSeverities:\n  - {controlName: Privileged Containers, severity: high, category: Second}\n  - {controlName: Host Namespaces, severity: high, category: First}", object: pod(both),
			severity: "high", category: "First", ruleSeverity: "high"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, "p", "rules:\n- name: r\n  "+tt.rule+"\n")
			r := p.Rules[0]
			res := r.Evaluate(tt.object, nil)
			severity, category := res.Reporting()
			if severity != tt.severity || category != tt.category || r.Severity() != tt.ruleSeverity {
				t.Errorf("result %q %q, rule %q; want %q %q, rule %q", severity, category, r.Severity(), tt.severity, tt.category, tt.ruleSeverity)
			}
		})
	}
}

// TestSeverityRank: the most serious first, a word that is not one last.
func TestSeverityRank(t *testing.T) {
	words := []policyv1alpha1.Severity{"critical", "high", "medium", "low", "info", "urgent"}
	for i := 1; i < len(words); i++ {
		if SeverityRank(words[i-1]) >= SeverityRank(words[i]) {
			t.Errorf("%s ranks %d, not before %s (%d)", words[i-1], SeverityRank(words[i-1]), words[i], SeverityRank(words[i]))
		}
	}
}

// TestCategoryPatternIsTheSchemas: the engine refuses the categories the
// CRD's schema refuses (both places a category is written), so that a
// policy the API server stores always compiles as written.
func TestCategoryPatternIsTheSchemas(t *testing.T) {
	crd, err := os.ReadFile("../../config/crd/bases/policy.podsieve.dev_securitypolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var found int
	lines := strings.Split(string(crd), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "category:" || i+1 >= len(lines) {
			continue
		}
		// The property's schema: the lines indented deeper than its name.
		indent := len(l) - len(strings.TrimLeft(l, " "))
		var props []string
		for _, p := range lines[i+1:] {
			if len(p)-len(strings.TrimLeft(p, " ")) <= indent {
				break
			}
			props = append(props, strings.TrimSpace(p))
		}
		found++
		for _, w := range []string{fmt.Sprintf("maxLength: %d", maxCategory), "minLength: 1", "pattern: " + categoryPattern.String()} {
			if !slices.Contains(props, w) {
				t.Errorf("the CRD's category at line %d lacks %q", i+1, w)
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d category properties in the CRD, want 2 (a rule's, a control's)", found)
	}
}
