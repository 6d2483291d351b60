package engine

import (
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

func TestExceptionState(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	policies := map[string]*Policy{
		"open":    mustPolicy(t, "open", "exceptions: {}\nrules:\n- name: mesh\n  podSecurity: {level: baseline}\n- name: strict\n  podSecurity: {level: restricted}"),
		"guarded": mustPolicy(t, "guarded", "exceptions: {allowedControls: [Capabilities], requireJustification: true}\n"+baselineRule),
	}
	lookup := func(name string) *Policy { return policies[name] }
	tests := []struct {
		name        string
		spec        string
		wantReason  string
		wantMessage []string
	}{
		{
			name:        "active until its expiry",
			spec:        "exceptions: [{policyName: open, ruleNames: [mesh]}]\nexpiresAt: \"2027-01-01T00:00:00Z\"",
			wantReason:  policyv1alpha1.ReasonActive,
			wantMessage: []string{`honoured for "open" until 2027-01-01T00:00:00Z`},
		},
		{
			name:        "expired",
			spec:        "exceptions: [{policyName: open, ruleNames: [mesh]}]\nexpiresAt: \"2026-01-01T00:00:00Z\"",
			wantReason:  policyv1alpha1.ReasonExpired,
			wantMessage: []string{"spec.expiresAt 2026-01-01T00:00:00Z has passed"},
		},
		{
			name:        "missing policy",
			spec:        "exceptions: [{policyName: gone, ruleNames: [r]}]",
			wantReason:  policyv1alpha1.ReasonPolicyNotFound,
			wantMessage: []string{`spec.exceptions[0].policyName: SecurityPolicy "gone" does not exist`},
		},
		{
			name:        "no rule matches",
			spec:        "exceptions: [{policyName: open, ruleNames: [\"mesh-*\"]}]",
			wantReason:  policyv1alpha1.ReasonRuleNotFound,
			wantMessage: []string{`spec.exceptions[0].ruleNames: no rule of SecurityPolicy "open" matches "mesh-*"; its rules are "mesh", "strict"`},
		},
		{
			name:        "a glob matching some rule is enough",
			spec:        "exceptions: [{policyName: open, ruleNames: [\"*\"]}]",
			wantReason:  policyv1alpha1.ReasonActive,
			wantMessage: []string{`honoured for "open"`},
		},
		{
			name:        "refused by guardrails",
			spec:        "exceptions: [{policyName: guarded, ruleNames: [r]}]\njustification: mesh\npodSecurity: [{controlName: Host Namespaces}]",
			wantReason:  policyv1alpha1.ReasonNotPermitted,
			wantMessage: []string{`remove control "Host Namespaces" from spec.podSecurity`},
		},
		{
			name:        "one target missing makes the whole exception not ready",
			spec:        "exceptions: [{policyName: open, ruleNames: [mesh]}, {policyName: gone, ruleNames: [r]}]",
			wantReason:  policyv1alpha1.ReasonPolicyNotFound,
			wantMessage: []string{`spec.exceptions[1].policyName: SecurityPolicy "gone" does not exist`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := mustException(t, "staging", "e", tt.spec).State(lookup, now)
			if st.Reason != tt.wantReason || st.Ready != (tt.wantReason == policyv1alpha1.ReasonActive) {
				t.Fatalf("state %+v, want reason %s", st, tt.wantReason)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(st.Message, m) {
					t.Errorf("message %q lacks %q", st.Message, m)
				}
			}
		})
	}
}
