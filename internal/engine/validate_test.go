package engine

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Entries that compile alone but not here: a field of another control, and
// values that can never match their field.
const (
	badField  = `{controlName: Host Ports, restrictedField: spec.hostPID}`
	badValues = `{controlName: Host Ports, restrictedField: 'spec.containers[*].ports[*].hostPort', values: [metrics]}`
)

func fields(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Field
	}
	return out
}

// firstField is the path an engine error starts with.
func firstField(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 {
		return msg[:i]
	}
	return msg
}

func TestValidatePolicy(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		wantFields []string
	}{
		{"valid", baselineRule, nil},
		{"three independent errors", "rules:\n" +
			"- name: r\n  podSecurity:\n    level: baseline\n    exclude: [" + badField + ", " + badValues + "]\n" +
			"- name: s\n  podSecurity: {level: baseline}\n  match: {selector: {matchExpressions: [{key: app, operator: In}]}}",
			[]string{"spec.rules[0].podSecurity.exclude[0].restrictedField", "spec.rules[0].podSecurity.exclude[1].values[0]", "spec.rules[1].match.selector"}},
		{"no rules", "action: Enforce", []string{"spec.rules"}},
		{"bad action and a rule without a name", "action: Deny\nrules:\n- podSecurity: {level: baseline}", []string{"spec.action", "spec.rules[0].name"}},
		{"a rule without a name goes on to its level and version", "rules:\n- podSecurity: {level: strict, version: v2}",
			[]string{"spec.rules[0].name", "spec.rules[0].podSecurity.level", "spec.rules[0].podSecurity.version"}},
		{"two rules without a name are not a name used twice", "rules:\n- podSecurity: {level: baseline}\n- podSecurity: {level: baseline}",
			[]string{"spec.rules[0].name", "spec.rules[1].name"}},
		{"a name used twice", baselineRule + "\n- name: r\n  podSecurity: {level: strict}",
			[]string{"spec.rules[1].podSecurity.level", "spec.rules[1].name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			if err := yaml.UnmarshalStrict([]byte(tt.spec), &sp.Spec); err != nil {
				t.Fatal(err)
			}
			errs := ValidatePolicy(sp)
			if got := strings.Join(fields(errs), " "); got != strings.Join(tt.wantFields, " ") {
				t.Errorf("fields %q, want %q; errors:\n%v", got, strings.Join(tt.wantFields, " "), errs.ToAggregate())
			}
			// One implementation of each check: CompilePolicy refuses
			// exactly what ValidatePolicy lists, and its error is listed.
			_, err := CompilePolicy(sp)
			if (err == nil) != (len(errs) == 0) {
				t.Fatalf("CompilePolicy: %v, but ValidatePolicy lists %d errors", err, len(errs))
			}
			if err != nil && !strings.Contains(errs.ToAggregate().Error(), firstField(err)) {
				t.Errorf("CompilePolicy's error %q is not among %v", err, errs.ToAggregate())
			}
		})
	}
}

func TestValidatePolicyIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n")
	for r := range 2 {
		fmt.Fprintf(&b, "- name: r%d\n  podSecurity:\n    level: baseline\n    exclude: [", r)
		for i := range MaxRuleEntries + 10 {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(badField)
		}
		b.WriteString("]\n")
	}
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if err := yaml.UnmarshalStrict([]byte(b.String()), &sp.Spec); err != nil {
		t.Fatal(err)
	}
	errs := ValidatePolicy(sp)
	// Each rule: one error for its entries past the limit, and one for
	// each of the MaxRuleEntries entries it reads.
	total := 2 * (1 + MaxRuleEntries)
	if len(errs) != MaxFieldErrors+1 {
		t.Fatalf("%d errors, want %d and one counting the rest", len(errs), MaxFieldErrors)
	}
	if last, want := errs[MaxFieldErrors].Detail, fmt.Sprintf("%d more errors are not listed", total-MaxFieldErrors); !strings.HasPrefix(last, want) {
		t.Errorf("last error %q, want it to start %q", last, want)
	}
}

func TestValidateException(t *testing.T) {
	const target = "exceptions: [{policyName: p, ruleNames: [r]}]\n"
	tests := []struct {
		name, namespace, spec string
		wantFields            []string
	}{
		{"valid", "staging", target + "podSecurity: [{controlName: Capabilities}]", nil},
		{"three independent errors", "staging", target +
			"match: {namespaces: [other], selector: {matchExpressions: [{key: app, operator: In}]}}\n" +
			"podSecurity: [" + badField + "]",
			[]string{"spec.match", "spec.match.selector", "spec.podSecurity[0].restrictedField"}},
		{"cluster exceptions namespace may reach others", "podsieve-system", target + "match: {namespaces: [other]}", nil},
		{"no targets", "staging", "podSecurity: [{controlName: Capabilities}]", []string{"spec.exceptions"}},
		{"each target's policy and rules", "staging", "exceptions: [{policyName: '', ruleNames: []}, {policyName: p, ruleNames: ['[']}]",
			[]string{"spec.exceptions[0].policyName", "spec.exceptions[0].ruleNames", "spec.exceptions[1].ruleNames[0]"}},
		{"empty lists", "staging", target + "podSecurity: []\nmatch: {names: [], kinds: []}",
			[]string{"spec.podSecurity", "spec.match.names", "spec.match.kinds"}},
		{"every entry", "staging", target + "podSecurity: [" + badField + ", {controlName: Capabilities}, " + badValues + "]",
			[]string{"spec.podSecurity[0].restrictedField", "spec.podSecurity[2].values[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: tt.namespace, Name: "e"}}
			if err := yaml.UnmarshalStrict([]byte(tt.spec), &pe.Spec); err != nil {
				t.Fatal(err)
			}
			errs := ValidateException(pe, "podsieve-system")
			if got := strings.Join(fields(errs), " "); got != strings.Join(tt.wantFields, " ") {
				t.Errorf("fields %q, want %q; errors:\n%v", got, strings.Join(tt.wantFields, " "), errs.ToAggregate())
			}
			// CompileException stops at the first of the same errors.
			_, err := CompileException(pe, "podsieve-system")
			if (err == nil) != (len(errs) == 0) {
				t.Fatalf("CompileException: %v, but ValidateException lists %d errors", err, len(errs))
			}
			if err != nil {
				if got := errs[0].Field + ": " + errs[0].Detail; got != err.Error() {
					t.Errorf("first error %q, want CompileException's %q", got, err.Error())
				}
			}
		})
	}
}
