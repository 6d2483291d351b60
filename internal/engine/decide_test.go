package engine

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecideLooksAtExceptionsOnlyToWaive: the checks run first, and a
// policy's exceptions are looked up only when a rule of it has something to
// waive, once per policy; the decision is the same as with them looked up.
func TestDecideLooksAtExceptionsOnlyToWaive(t *testing.T) {
	p := mustPolicy(t, "mesh", "exceptions: {allowedControls: [Capabilities]}\nrules:\n- name: a\n  podSecurity: {level: baseline}\n- name: b\n  podSecurity: {level: baseline}")
	e := mustException(t, "team", "net-admin", "exceptions: [{policyName: mesh, ruleNames: ['*']}]\npodSecurity: [{controlName: Capabilities, restrictedField: 'spec.containers[*].securityContext.capabilities.add', values: [NET_ADMIN]}]")
	pod := func(add ...corev1.Capability) *Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
		if len(add) > 0 {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: add}}
		}
		return podObject("team", p)
	}
	for _, tt := range []struct {
		name        string
		object      *Object
		wantLookups int
		wantAllowed bool
		wantOutcome Outcome
	}{
		{name: "a clean pod looks at no exception", object: pod(), wantLookups: 0, wantAllowed: true, wantOutcome: Pass},
		{name: "a pod an exception admits looks once for both rules", object: pod("NET_ADMIN"), wantLookups: 1, wantAllowed: true, wantOutcome: Pass},
		{name: "a pod nothing admits is refused", object: pod("SYS_ADMIN"), wantLookups: 1, wantAllowed: false, wantOutcome: Fail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lookups := 0
			candidates := func(string, int64) ([]*Exception, int64, int) { lookups++; return []*Exception{e}, 0, 1 }
			d := Decide([]*Policy{p}, candidates, tt.object, nil, benchNow, Admission)
			if lookups != tt.wantLookups {
				t.Errorf("looked up exceptions %d times, want %d", lookups, tt.wantLookups)
			}
			if d.Allowed != tt.wantAllowed || len(d.Results) != 2 {
				t.Fatalf("allowed %v with %d results, want %v with 2", d.Allowed, len(d.Results), tt.wantAllowed)
			}
			for _, res := range d.Results {
				if res.Outcome != tt.wantOutcome {
					t.Errorf("rule %s: %s, want %s", res.Rule.Name, res.Outcome, tt.wantOutcome)
				}
				if want := tt.wantLookups > 0; (len(res.Selected) == 1) != want {
					t.Errorf("rule %s selected %d exceptions", res.Rule.Name, len(res.Selected))
				}
			}
		})
	}
}

// TestCandidatesAreCharged: what handing over the exceptions cost (an index
// compiling those it holds in a form of its own) is charged to the decision, and a
// decision charged more than it has left refuses, whatever it was handed.
func TestCandidatesAreCharged(t *testing.T) {
	p := mustBaselinePolicy(t, "p")
	e := mustException(t, "team", "net", "exceptions: [{policyName: p, ruleNames: [baseline]}]\n"+
		"podSecurity: [{controlName: Capabilities, restrictedField: \"spec.containers[*].securityContext.capabilities.add\", values: [NET_ADMIN]}]")
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}}}
	o := podObject("team", pod)
	free := Decide([]*Policy{p}, AllExceptions([]*Exception{e}), o, nil, benchNow, Admission)
	if !free.Allowed {
		t.Fatalf("the exception does not admit the pod: %+v", free.Results)
	}
	// What the decision spent before it asked for the exceptions.
	var leftAtOffer int64
	DecideWithin(DefaultLimits, []*Policy{p}, func(_ string, left int64) ([]*Exception, int64, int) {
		leftAtOffer = left
		return []*Exception{e}, 0, 1
	}, o, nil, benchNow, Admission)
	before := DefaultMaxSteps - leftAtOffer
	for _, tt := range []struct {
		name        string
		limit       int64 // 0: DefaultLimits
		spent       int64
		wantAllowed bool
		wantSteps   int64 // 0: not checked
	}{
		{name: "free", spent: 0, wantAllowed: true, wantSteps: free.Steps},
		{name: "charged", spent: 5000, wantAllowed: true, wantSteps: free.Steps + 5000},
		{name: "charged all that is left", limit: free.Steps + 5000, spent: 5000, wantAllowed: true, wantSteps: free.Steps + 5000},
		{name: "charged more than is left", limit: free.Steps + 4999, spent: 5000, wantAllowed: false},
		{name: "charged more than is left at the hand-over", limit: before + 4999, spent: 5000, wantAllowed: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var offeredLeft int64
			// As an index does: it hands over none of what it cannot pay
			// for, and says how many it was to hand over.
			candidates := func(_ string, left int64) ([]*Exception, int64, int) {
				offeredLeft = left
				if tt.spent > left {
					return nil, tt.spent, 1
				}
				return []*Exception{e}, tt.spent, 1
			}
			d := DecideWithin(Limits{MaxSteps: tt.limit}, []*Policy{p}, candidates, o, nil, benchNow, Admission)
			if d.Allowed != tt.wantAllowed || (d.Err != nil) == tt.wantAllowed {
				t.Fatalf("allowed %v, err %v; want allowed %v", d.Allowed, d.Err, tt.wantAllowed)
			}
			if tt.wantSteps != 0 && d.Steps != tt.wantSteps {
				t.Errorf("%d steps, want %d", d.Steps, tt.wantSteps)
			}
			if max := cmp.Or(tt.limit, DefaultMaxSteps); offeredLeft <= 0 || offeredLeft >= max {
				t.Errorf("offered %d steps left of %d", offeredLeft, max)
			}
			if !tt.wantAllowed && !strings.Contains(d.Err.Error(), "of 1 PolicyExceptions") {
				t.Errorf("the stop does not count the exceptions handed over: %v", d.Err)
			}
		})
	}
}

// TestBudgetSpentOnlyWhereSomethingIsWaived: a namespace's exceptions cost a
// decision's budget only when there is a violation to waive. A clean pod is
// admitted whatever its namespace holds (no exception could change that);
// a pod with a violation, in a namespace whose exceptions cost more than the
// budget, is refused with the stop and the violations found before it.
func TestBudgetSpentOnlyWhereSomethingIsWaived(t *testing.T) {
	p := mustPolicy(t, "mesh", "exceptions: {allowedControls: [Capabilities]}\nrules:\n- name: a\n  podSecurity: {level: baseline}")
	var many []*Exception
	for i := range 200 {
		many = append(many, mustException(t, "team", fmt.Sprintf("e-%d", i), "exceptions: [{policyName: mesh, ruleNames: ['*']}]\nmatch: {names: ['*-web-*-x']}\npodSecurity: [{controlName: Capabilities, restrictedField: 'spec.containers[*].securityContext.capabilities.add', values: [NET_ADMIN]}]"))
	}
	pod := func(hostNetwork bool) *Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{HostNetwork: hostNetwork, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
		return podObject("team", p)
	}
	full := Decide([]*Policy{p}, AllExceptions(many), pod(true), nil, benchNow, Admission)
	checks := Decide([]*Policy{p}, AllExceptions(nil), pod(true), nil, benchNow, Admission)
	if full.Steps <= checks.Steps {
		t.Fatalf("the exceptions cost nothing: %d steps with them, %d without", full.Steps, checks.Steps)
	}
	limits := Limits{MaxSteps: checks.Steps + 1}

	clean := DecideWithin(limits, []*Policy{p}, AllExceptions(many), pod(false), nil, benchNow, Admission)
	if !clean.Allowed || clean.Err != nil {
		t.Errorf("clean pod: allowed %v, err %v; want admitted without touching the exceptions", clean.Allowed, clean.Err)
	}
	refused := DecideWithin(limits, []*Policy{p}, AllExceptions(many), pod(true), nil, benchNow, Admission)
	var stop *StoppedError
	if refused.Allowed || !errors.As(refused.Err, &stop) {
		t.Fatalf("hostNetwork pod: allowed %v, err %v; want refused, stopped", refused.Allowed, refused.Err)
	}
	var controls []string
	for _, f := range refused.Results[0].Findings {
		controls = append(controls, f.CheckID)
	}
	if len(controls) != 2 || controls[0] != "hostNamespaces" || controls[1] != StoppedCheckID {
		t.Errorf("findings of the stopped rule: %v; want the violation found, then the stop", controls)
	}
}
