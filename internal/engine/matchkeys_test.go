package engine

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

func TestMatchKeys(t *testing.T) {
	tests := []struct {
		name                  string
		match                 *policyv1alpha1.ExceptionMatch
		names, prefixes, kind []string
		pinned                bool
	}{
		{"no match", nil, nil, nil, nil, false},
		{"kinds only", &policyv1alpha1.ExceptionMatch{Kinds: []policyv1alpha1.PodBearingKind{"Pod"}}, nil, nil, []string{"Pod"}, false},
		{"literal names", &policyv1alpha1.ExceptionMatch{Names: []string{"web-0", "web-1", "web-0"}}, []string{"web-0", "web-1"}, nil, nil, true},
		{"trailing stars", &policyv1alpha1.ExceptionMatch{Names: []string{"web-*", "db-**"}}, nil, []string{"web-", "db-"}, nil, true},
		{"a wildcard inside: its literal prefix", &policyv1alpha1.ExceptionMatch{Names: []string{"web-?-x", "web"}, Kinds: []policyv1alpha1.PodBearingKind{"Job"}},
			[]string{"web"}, []string{"web-"}, []string{"Job"}, true},
		{"a leading wildcard pins nothing", &policyv1alpha1.ExceptionMatch{Names: []string{"web-1", "*-1"}}, nil, nil, nil, false},
		{"* pins nothing", &policyv1alpha1.ExceptionMatch{Names: []string{"*"}, Kinds: []policyv1alpha1.PodBearingKind{"Pod"}}, nil, nil, []string{"Pod"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "e"}, Spec: policyv1alpha1.PolicyExceptionSpec{
				Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"*"}}}, Match: tt.match}}
			e, err := CompileException(pe, "podsieve-system")
			if err != nil {
				t.Fatal(err)
			}
			names, prefixes, kinds, pinned := e.MatchKeys()
			if !slices.Equal(names, tt.names) || !slices.Equal(prefixes, tt.prefixes) || !slices.Equal(kinds, tt.kind) || pinned != tt.pinned {
				t.Errorf("MatchKeys() = %q, %q, %q, %v; want %q, %q, %q, %v", names, prefixes, kinds, pinned, tt.names, tt.prefixes, tt.kind, tt.pinned)
			}
			// The keys are necessary: every name the exception matches
			// has one of them.
			if pinned {
				for _, name := range []string{"web", "web-", "web-0", "web-1", "web-a-x", "db-", "db-0", "x-1", "other"} {
					has := slices.Contains(names, name) || slices.ContainsFunc(prefixes, func(p string) bool { return len(name) >= len(p) && name[:len(p)] == p })
					if e.match.names.Match(name) && !has {
						t.Errorf("%q matches and has no key", name)
					}
				}
			}
		})
	}
}

// TestWithoutEntries: an exception without entries keeps what a refusal needs and drops the
// entries; it is judged by the guardrails as its compiled form was.
func TestWithoutEntries(t *testing.T) {
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: policyv1alpha1.SecurityPolicySpec{
		Exceptions: &policyv1alpha1.ExceptionGuardrails{RequireJustification: new(true), Controls: []policyv1alpha1.ControlGuardrail{{
			ControlName: policyv1alpha1.ControlCapabilities, AllowedValues: []string{"NET_RAW"}}}},
		Rules: []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline}}},
	}}
	p, err := CompilePolicy(sp)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(values []string, justification string) *Exception {
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "e", UID: "u", Generation: 3}, Spec: policyv1alpha1.PolicyExceptionSpec{
			Exceptions:    []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"r"}}},
			Match:         &policyv1alpha1.ExceptionMatch{Names: []string{"web-*"}},
			Justification: justification,
			PodSecurity: []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities,
				RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: values}},
		}}
		e, err := CompileException(pe, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	policies := func(name string) *Policy {
		if name == "p" {
			return p
		}
		return nil
	}
	for _, tt := range []struct {
		name          string
		values        []string
		justification string
	}{
		{"permitted", []string{"NET_RAW"}, "mesh"},
		{"a value beyond the limit", []string{"NET_ADMIN"}, "mesh"},
		{"no justification", []string{"NET_RAW"}, "  "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			full := mk(tt.values, tt.justification)
			want := p.Permits(full, time.Time{})
			bare := mk(tt.values, tt.justification).WithoutEntries(policies)
			if bare.Exclusions != nil || bare.Source != full.Source || bare.UID != "u" || bare.Generation != 3 || !bare.Targets("p", "r") {
				t.Fatalf("bare: %+v", bare)
			}
			if got := p.Permits(bare, time.Time{}); !sameError(got, want) {
				t.Errorf("bare judged %v, compiled %v", got, want)
			}
			o := &Object{Kind: "Pod", Namespace: "a", Name: "web-0"}
			if !bare.Matches(o, nil) {
				t.Error("the bare exception does not match what its compiled form matches")
			}
			if !bare.SameJudgement(bare) || !mk(tt.values, tt.justification).WithoutEntries(policies).SameJudgement(bare) {
				t.Error("two copies of the same object against the same policies differ")
			}
		})
	}
}
