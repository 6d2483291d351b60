package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// TestDecideWithinFailsClosed: a decision stopped by its budget or by its
// caller never allows what an Enforce rule did not finish, says why, and
// stops at the same point for the same input.
func TestDecideWithinFailsClosed(t *testing.T) {
	var istio benchCase
	for _, bc := range benchCases() {
		if bc.name == "istio" {
			istio = bc
		}
	}
	p, excs, o := istio.compile(t)
	full := DecideWithin(Limits{MaxSteps: math.MaxInt64}, []*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
	if !full.Allowed || full.Err != nil {
		t.Fatalf("istio with no limit: allowed %v, err %v", full.Allowed, full.Err)
	}
	if d := Decide([]*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission); d.Steps != full.Steps || !d.Allowed {
		t.Errorf("Decide spent %d steps (allowed %v), DecideWithin without limit %d", d.Steps, d.Allowed, full.Steps)
	}
	// Every budget short of what the decision needs refuses it.
	for budget := int64(1); budget < full.Steps; budget += max(1, full.Steps/40) {
		d := DecideWithin(Limits{MaxSteps: budget}, []*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
		var stop *StoppedError
		if d.Allowed || !errors.As(d.Err, &stop) || stop.Cancelled {
			t.Fatalf("budget %d of %d: allowed %v, err %v", budget, full.Steps, d.Allowed, d.Err)
		}
		res := d.Results[0]
		last := res.Findings[len(res.Findings)-1]
		if res.Outcome != Fail || last.CheckID != StoppedCheckID || last.Covered() || !strings.Contains(last.Detail, "exceeded its work budget") ||
			!strings.Contains(res.DenyMessage(o), "podsieve stopped evaluating") {
			t.Fatalf("budget %d: result %s, findings:\n%s", budget, res.Outcome, dumpFindings(res.Findings))
		}
		again := DecideWithin(Limits{MaxSteps: budget}, []*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
		if again.Steps != d.Steps || len(again.Results[0].Findings) != len(res.Findings) {
			t.Fatalf("budget %d: %d steps then %d", budget, d.Steps, again.Steps)
		}
	}
	// Cancelled before it starts: refused, and said so.
	done := make(chan struct{})
	close(done)
	d := DecideWithin(Limits{Done: done}, []*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
	var stop *StoppedError
	if d.Allowed || !errors.As(d.Err, &stop) || !stop.Cancelled || !strings.Contains(d.Err.Error(), "cancelled") {
		t.Errorf("cancelled: allowed %v, err %v", d.Allowed, d.Err)
	}
}

// TestDecideWithinAuditAndLaterRules: a stop refuses only through Enforce
// rules; an Audit rule not finished fails (and reports) without refusing, and
// rules after the stop fail closed too.
func TestDecideWithinAuditAndLaterRules(t *testing.T) {
	pod := mkPod(withContainers(ctr("app", caps([]corev1.Capability{"NET_ADMIN"}, nil))))
	o := podObject("staging", pod)
	audit := mustPolicy(t, "a", "action: Audit\n"+baselineRule)
	enforce := mustPolicy(t, "e", "rules:\n- name: r\n  podSecurity: {level: privileged}\n- name: s\n  podSecurity: {level: privileged}")
	full := DecideWithin(Limits{MaxSteps: math.MaxInt64}, []*Policy{audit, enforce}, AllExceptions(nil), o, nil, benchNow, Admission)
	if !full.Allowed || full.Err != nil || len(full.Results) != 3 {
		t.Fatalf("no limit: allowed %v, err %v, %d results", full.Allowed, full.Err, len(full.Results))
	}
	// Stopped in the Audit rule: the privileged rules (which would pass)
	// are not decided, and refuse.
	d := DecideWithin(Limits{MaxSteps: 10}, []*Policy{audit, enforce}, AllExceptions(nil), o, nil, benchNow, Admission)
	if d.Allowed || d.Err == nil || len(d.Results) != 3 {
		t.Fatalf("stopped: allowed %v, err %v, %d results", d.Allowed, d.Err, len(d.Results))
	}
	for _, res := range d.Results {
		if res.Outcome != Fail || res.Findings[len(res.Findings)-1].CheckID != StoppedCheckID {
			t.Errorf("%s/%s: %s, findings:\n%s", res.Rule.Policy.Name, res.Rule.Name, res.Outcome, dumpFindings(res.Findings))
		}
	}
	// Stopped in the Audit rule alone: allowed, and the rule reports the stop.
	d = DecideWithin(Limits{MaxSteps: 10}, []*Policy{audit}, AllExceptions(nil), o, nil, benchNow, Admission)
	if !d.Allowed || d.Err == nil || d.Results[0].Outcome != Fail {
		t.Errorf("audit only: allowed %v, err %v", d.Allowed, d.Err)
	}
}

// TestGroupEntries: a finding tests the entries of its control, and the
// HostPath Volumes override still reaches restricted's hostPath findings.
func TestGroupEntries(t *testing.T) {
	var xs []Exclusion
	for _, c := range []policyv1alpha1.ControlName{policyv1alpha1.ControlCapabilities, policyv1alpha1.ControlHostPathVolumes, policyv1alpha1.ControlCapabilities, policyv1alpha1.ControlVolumeTypes} {
		xs = append(xs, Exclusion{control: c})
	}
	g := groupEntries(xs)
	if got := g.of(controlID(policyv1alpha1.ControlCapabilities)); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("Capabilities: %v", got)
	}
	f := Finding{Violation: Violation{Control: policyv1alpha1.ControlVolumeTypes, CheckID: string(checkRestrictedVolumes), Field: fHostPathVolume}}
	if ids := f.controlIDs(); ids != [2]int{controlID(policyv1alpha1.ControlVolumeTypes), controlID(policyv1alpha1.ControlHostPathVolumes)} {
		t.Errorf("hostPath finding tests controls %v", ids)
	}
	if got := g.of(controlID(policyv1alpha1.ControlHostPathVolumes)); len(got) != 1 || got[0] != 1 {
		t.Errorf("HostPath Volumes: %v", got)
	}
	if got := g.of(controlID(policyv1alpha1.ControlSysctls)); len(got) != 0 {
		t.Errorf("Sysctls: %v", got)
	}
	var none entryGroups
	if got := none.of(controlID(policyv1alpha1.ControlCapabilities)); len(got) != 0 {
		t.Errorf("no entries: %v", got)
	}
}

// TestSelectorsAreCharged: matching an exception's label selectors costs a
// decision steps by their requirements and the length of their values, and
// a selector larger than an exception may hold is refused, so that
// selectors cannot make a review cost more than its budget says.
func TestSelectorsAreCharged(t *testing.T) {
	p := mustBaselinePolicy(t, "p")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app", Labels: map[string]string{"a": "b"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "nginx", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}}}
	o, err := NewObject(pod)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(sel *metav1.LabelSelector) (*Exception, error) {
		return CompileException(&policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "net"}, Spec: policyv1alpha1.PolicyExceptionSpec{
			Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"*"}}},
			Match:      &policyv1alpha1.ExceptionMatch{Selector: sel},
			PodSecurity: []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities,
				RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}},
		}}, "podsieve-system")
	}
	steps := func(sel *metav1.LabelSelector) int64 {
		t.Helper()
		e, err := compile(sel)
		if err != nil {
			t.Fatal(err)
		}
		d := Decide([]*Policy{p}, AllExceptions([]*Exception{e}), o, nil, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), Admission)
		if !d.Allowed {
			t.Fatalf("the exception does not apply: %+v", d.Results)
		}
		return d.Steps
	}
	largest := func(requirements, values int) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		for range requirements - 1 {
			r := metav1.LabelSelectorRequirement{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}
			for j := range values - 1 {
				r.Values = append(r.Values, fmt.Sprintf("value-%04d", j)) // 10 bytes: 3 steps
			}
			s.MatchExpressions = append(s.MatchExpressions, r)
		}
		return s
	}
	base := steps(&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}})
	got := steps(largest(MaxSelectorRequirements, MaxSelectorValues)) - base
	if want := int64((MaxSelectorRequirements - 1) * (stepsPerRequirement + 2 + (MaxSelectorValues-1)*3)); got != want {
		t.Fatalf("the largest selector costs %d more steps than one label, want %d", got, want)
	}
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		want string
	}{
		{"too many requirements", largest(MaxSelectorRequirements+1, 1), "spec.match.selector: 17 requirements (matchLabels and matchExpressions together); a PolicyException's selector may have at most 16"},
		{"too many values", largest(2, MaxSelectorValues+1), "spec.match.selector.matchExpressions[0].values: 65 values; at most 64"},
	} {
		if _, err := compile(tc.sel); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestEntryLimits: the engine refuses more podSecurity entries than the
// schema admits, for exceptions and rules read from files, with a message
// that says what to change (the entries of a source are indexed by a byte).
func TestEntryLimits(t *testing.T) {
	entry := policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlCapabilities,
		RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}
	for _, tc := range []struct {
		name    string
		entries int
		compile func(xs []policyv1alpha1.PodSecurityExclusion) error
		want    string
	}{
		{"exception at the limit", MaxExceptionEntries, compileExceptionWith, ""},
		{"exception over the limit", 256, compileExceptionWith, "spec.podSecurity: 256 entries; a PolicyException may have at most 16"},
		{"rule at the limit", MaxRuleEntries, compilePolicyWith, ""},
		{"rule over the limit", 300, compilePolicyWith, "spec.rules[0].podSecurity.exclude: 300 entries; a rule may have at most 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.compile(slices.Repeat([]policyv1alpha1.PodSecurityExclusion{entry}, tc.entries))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

func compileExceptionWith(xs []policyv1alpha1.PodSecurityExclusion) error {
	_, err := CompileException(&policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "net"}, Spec: policyv1alpha1.PolicyExceptionSpec{
		Exceptions:  []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"*"}}},
		PodSecurity: xs,
	}}, "podsieve-system")
	return err
}

func compilePolicyWith(xs []policyv1alpha1.PodSecurityExclusion) error {
	_, err := CompilePolicy(&policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: policyv1alpha1.SecurityPolicySpec{
		Action: policyv1alpha1.ActionEnforce,
		Rules: []policyv1alpha1.PolicyRule{{Name: "r",
			PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest", Exclude: xs}}},
	}})
	return err
}
