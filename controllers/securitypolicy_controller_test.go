package controllers

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestRecreatedPolicyIsRecompiled: a policy deleted and created again under
// the same name before the reconciler sees the deletion (kubectl replace
// --force; one coalesced work item) is back at generation 1, with a new UID;
// its new spec is what is enforced.
func TestRecreatedPolicyIsRecompiled(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).
		WithStatusSubresource(&policyv1alpha1.SecurityPolicy{}).
		WithIndex(&policyv1alpha1.PolicyException{}, IndexExceptionPolicy, exceptionPolicies).Build()
	ix := index.New("podsieve-system")
	r := &SecurityPolicyReconciler{Client: c, Index: ix, leader: &leadership{elected: make(chan struct{})}, sync: newSyncTracker(ix)}
	// The fake client assigns no UIDs; the API server would.
	mk := func(level policyv1alpha1.PodSecurityLevel) *policyv1alpha1.SecurityPolicy {
		return &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, UID: types.UID("uid-" + string(level))},
			Spec: policyv1alpha1.SecurityPolicySpec{Action: policyv1alpha1.ActionEnforce, Rules: []policyv1alpha1.PolicyRule{{
				Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: level, Version: "latest"}}}}}
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: "p"}}
	if err := c.Create(ctx, mk(policyv1alpha1.LevelRestricted)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	// delete and re-create, then one reconcile (the work queue coalesced both events)
	if err := c.Delete(ctx, mk(policyv1alpha1.LevelRestricted)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, mk(policyv1alpha1.LevelPrivileged)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := ix.Snapshot().Policy("p").Rules[0].Level; string(got) != string(policyv1alpha1.LevelPrivileged) {
		t.Fatalf("the index enforces level %s of the deleted object, want privileged", got)
	}
}

// stateSeries is the podsieve_securitypolicy_state series of a policy: the
// states it has a series for, with their values.
func stateSeries(t *testing.T, name string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	policyStateGauge.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["name"] == name {
			out[labels["state"]] = d.GetGauge().GetValue()
		}
	}
	return out
}

// TestReconcileStoredPolicy: what the reconciler puts in force for a stored
// policy, what its Ready condition says and what the alerts read, for a
// policy that compiles, one that does not and has no valid form (read at
// its strictest), one with a last valid form, and one that cannot be read.
func TestReconcileStoredPolicy(t *testing.T) {
	rule := func(exclude ...policyv1alpha1.PodSecurityExclusion) []policyv1alpha1.PolicyRule {
		return []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Exclude: exclude}}}
	}
	// A restrictedField of another control: stored past the webhook, or by
	// a version without one.
	broken := policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlCapabilities, RestrictedField: "spec.hostPID"}
	lastValid := func(generation int64) *policyv1alpha1.LastValidSpec {
		return &policyv1alpha1.LastValidSpec{Generation: generation, Spec: runtime.RawExtension{Raw: []byte(`{"rules":[{"name":"r","podSecurity":{"level":"restricted"}}]}`)}}
	}
	for _, tt := range []struct {
		name           string
		generation     int64
		rules          []policyv1alpha1.PolicyRule
		last           *policyv1alpha1.LastValidSpec
		wantReason     string
		wantGeneration int64 // in force; 0 for none
		wantStrict     int
		wantMessage    string
		wantLastValid  int64
	}{
		{name: "compiles as written", generation: 1, rules: rule(), wantReason: policyv1alpha1.ReasonCompiled, wantGeneration: 1,
			wantMessage: "1 rule compiled; enforced with action Enforce", wantLastValid: 1},
		{name: "does not compile and has no valid form: read at its strictest", generation: 2, rules: rule(broken),
			wantReason: policyv1alpha1.ReasonDegraded, wantGeneration: 2, wantStrict: 1,
			wantMessage: `generation 2 does not compile as this version of podsieve reads it (an earlier version accepted it, or it was written while the validating webhook was bypassed); ` +
				`it is enforced at its strictest (1 rule, action Enforce) until the spec is fixed: spec.rules[0].podSecurity.exclude[0].restrictedField: "spec.hostPID" is not a field of control "Capabilities"; ` +
				`use one of spec.containers[*].securityContext.capabilities.add, spec.containers[*].securityContext.capabilities.drop, ` +
				`spec.ephemeralContainers[*].securityContext.capabilities.add, spec.ephemeralContainers[*].securityContext.capabilities.drop, ` +
				`spec.initContainers[*].securityContext.capabilities.add, spec.initContainers[*].securityContext.capabilities.drop (until then the entry waives nothing)`},
		{name: "an earlier podsieve kept this very spec as the last valid one: read at its strictest", generation: 2, rules: rule(broken), last: lastValid(2),
			wantReason: policyv1alpha1.ReasonDegraded, wantGeneration: 2, wantStrict: 1, wantLastValid: 2,
			wantMessage: "it is enforced at its strictest"},
		{name: "does not compile, and an earlier generation did: that one stays in force", generation: 3, rules: rule(broken), last: lastValid(2),
			wantReason: policyv1alpha1.ReasonDegraded, wantGeneration: 2, wantLastValid: 2,
			wantMessage: "generation 2 (1 rule) stays in force until the spec is fixed"},
		{name: "cannot be read even strictly: not enforced", generation: 1,
			wantReason: policyv1alpha1.ReasonInvalidSpec, wantMessage: "the policy does not compile and is not enforced: spec.rules: a policy needs at least one rule"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).
				WithStatusSubresource(&policyv1alpha1.SecurityPolicy{}).
				WithIndex(&policyv1alpha1.PolicyException{}, IndexExceptionPolicy, exceptionPolicies).Build()
			ix := index.New("podsieve-system")
			elected := make(chan struct{})
			close(elected)
			r := &SecurityPolicyReconciler{Client: c, Index: ix, Recorder: events.NewFakeRecorder(10), leader: &leadership{elected: elected}, sync: newSyncTracker(ix)}
			name := "stored-" + strings.ReplaceAll(strings.Fields(tt.name)[0], ":", "") + "-" + fmt.Sprint(tt.generation) + fmt.Sprint(tt.last != nil)
			sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid"},
				Spec: policyv1alpha1.SecurityPolicySpec{Action: policyv1alpha1.ActionEnforce, Rules: tt.rules}}
			if err := c.Create(ctx, sp); err != nil {
				t.Fatal(err)
			}
			// The fake client starts every object at generation 1, and
			// keeps the status the API server would have stored.
			sp.Generation = tt.generation
			if err := c.Update(ctx, sp); err != nil {
				t.Fatal(err)
			}
			sp.Status.LastValidSpec = tt.last
			if err := c.Status().Update(ctx, sp); err != nil {
				t.Fatal(err)
			}
			req := ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}
			for range 2 { // the second reconcile finds the policy in force
				if _, err := r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			p := ix.Snapshot().Policy(name)
			switch {
			case tt.wantGeneration == 0 && p != nil:
				t.Errorf("generation %d is in force, want none", p.Generation)
			case tt.wantGeneration != 0 && p == nil:
				t.Errorf("nothing in force, want generation %d", tt.wantGeneration)
			case p != nil && (p.Generation != tt.wantGeneration || len(p.Strict) != tt.wantStrict):
				t.Errorf("generation %d in force with %d parts read strictly, want %d with %d", p.Generation, len(p.Strict), tt.wantGeneration, tt.wantStrict)
			}
			if err := c.Get(ctx, req.NamespacedName, sp); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(sp.Status.Conditions, policyv1alpha1.ConditionReady)
			if cond == nil || cond.Reason != tt.wantReason || !strings.Contains(cond.Message, tt.wantMessage) {
				t.Errorf("Ready: %+v, want reason %s with %q", cond, tt.wantReason, tt.wantMessage)
			} else if (cond.Status == metav1.ConditionTrue) != (tt.wantReason == policyv1alpha1.ReasonCompiled) {
				t.Errorf("Ready is %s with reason %s", cond.Status, cond.Reason)
			}
			// kstatus (Flux, Argo CD, kubectl wait) reaches a verdict:
			// Current as written, Failed (Stalled) until a person fixes it.
			wantKstatus := status.FailedStatus
			if tt.wantReason == policyv1alpha1.ReasonCompiled {
				wantKstatus = status.CurrentStatus
			}
			if res := kstatusOf(t, sp); res.Status != wantKstatus {
				t.Errorf("kstatus %s (%s), want %s", res.Status, res.Message, wantKstatus)
			}
			if stalled := meta.FindStatusCondition(sp.Status.Conditions, policyv1alpha1.ConditionStalled); (stalled != nil) != (wantKstatus == status.FailedStatus) ||
				stalled != nil && stalled.Reason != tt.wantReason {
				t.Errorf("Stalled = %+v, want it exactly when the policy is not Compiled, with Ready's reason", stalled)
			}
			if got := sp.Status.LastValidSpec; (got == nil && tt.wantLastValid != 0) || (got != nil && got.Generation != tt.wantLastValid) {
				t.Errorf("lastValidSpec %+v, want generation %d", got, tt.wantLastValid)
			}
			if got, want := stateSeries(t, name), map[string]float64{tt.wantReason: 1}; !maps.Equal(got, want) {
				t.Errorf("podsieve_securitypolicy_state: %v, want %v", got, want)
			}
			if err := c.Delete(ctx, sp); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			if got := stateSeries(t, name); len(got) != 0 {
				t.Errorf("podsieve_securitypolicy_state of a deleted policy: %v", got)
			}
		})
	}
}

// TestStrictReadingFollowsTheSpec: a policy read at its strictest is not a
// valid form to keep. When its spec changes and still does not compile, the
// new spec is read at its strictest, as a replica that starts then reads
// it, so that replicas never enforce different generations of it.
func TestStrictReadingFollowsTheSpec(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).
		WithStatusSubresource(&policyv1alpha1.SecurityPolicy{}).
		WithIndex(&policyv1alpha1.PolicyException{}, IndexExceptionPolicy, exceptionPolicies).Build()
	ix := index.New("podsieve-system")
	r := &SecurityPolicyReconciler{Client: c, Index: ix, Recorder: events.NewFakeRecorder(10), leader: &leadership{elected: make(chan struct{})}, sync: newSyncTracker(ix)}
	entry := func(field string) policyv1alpha1.PodSecurityExclusion {
		return policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlCapabilities, RestrictedField: field}
	}
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid"}, Spec: policyv1alpha1.SecurityPolicySpec{
		Rules: []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline,
			Exclude: []policyv1alpha1.PodSecurityExclusion{entry("spec.hostPID")}}}}}}
	if err := c.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: "p"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if p := ix.Snapshot().Policy("p"); p == nil || len(p.Strict) != 1 {
		t.Fatalf("in force: %+v, want generation 1 read strictly", p)
	}
	sp.Spec.Rules[0].PodSecurity.Exclude = append(sp.Spec.Rules[0].PodSecurity.Exclude, entry("spec.hostIPC"))
	sp.Generation = 2
	if err := c.Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if p := ix.Snapshot().Policy("p"); p == nil || p.Generation != 2 || len(p.Strict) != 2 {
		t.Fatalf("in force: generation %d with %d parts read strictly, want generation 2 with 2", p.Generation, len(p.Strict))
	}
}
