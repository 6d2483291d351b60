package controllers

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// kstatusOf is what kstatus (the library Flux, Argo CD's and kubectl's
// health checks follow) makes of obj as stored.
func kstatusOf(t *testing.T, obj client.Object) *status.Result {
	t.Helper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	noErr(t, err)
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	noErr(t, err)
	return res
}

// TestExceptionKstatus: every state the exception controller writes gives
// kstatus a verdict: Current when Active, Failed (with the reason) when the
// exception waits for a person, and Current again once it is fixed, with
// Stalled gone.
func TestExceptionKstatus(t *testing.T) {
	strict := &policyv1alpha1.SecurityPolicy{}
	noErr(t, yaml.UnmarshalStrict([]byte("metadata: {name: strict, uid: uid-strict, generation: 1}\n"+
		"spec: {exceptions: {allowedControls: [Capabilities]}, rules: [{name: baseline, podSecurity: {level: baseline}}]}"), strict))
	for _, tt := range []struct {
		name, policy, extra string
		wantReason          string
		want                status.Status
		fix                 string // spec to set; the exception is then Active
	}{
		{name: "active", policy: "open", wantReason: policyv1alpha1.ReasonActive, want: status.CurrentStatus},
		{name: "expired", policy: "open", extra: `expiresAt: "2026-11-01T00:00:00Z"`,
			wantReason: policyv1alpha1.ReasonExpired, want: status.FailedStatus, fix: `expiresAt: "2026-12-01T00:00:00Z"`},
		{name: "not-permitted", policy: "strict", wantReason: policyv1alpha1.ReasonNotPermitted, want: status.FailedStatus},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			pe := exceptionNaming("team", tt.name, tt.policy, tt.extra)
			f := newExceptionFixture(t, pe, strict)
			p, err := engine.CompilePolicy(strict)
			noErr(t, err)
			f.ix.SetPolicy(p)
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pe)}
			_, err = f.r.Reconcile(ctx, req)
			noErr(t, err)
			noErr(t, f.c.Get(ctx, req.NamespacedName, pe))
			ready := meta.FindStatusCondition(pe.Status.Conditions, policyv1alpha1.ConditionReady)
			if ready == nil || ready.Reason != tt.wantReason {
				t.Fatalf("Ready = %+v, want reason %s", ready, tt.wantReason)
			}
			res := kstatusOf(t, pe)
			if res.Status != tt.want {
				t.Fatalf("kstatus %s (%s), want %s", res.Status, res.Message, tt.want)
			}
			stalled := meta.FindStatusCondition(pe.Status.Conditions, policyv1alpha1.ConditionStalled)
			switch {
			case tt.want == status.FailedStatus && (stalled == nil || stalled.Reason != tt.wantReason || stalled.Message != ready.Message):
				t.Fatalf("Stalled = %+v, want True with Ready's reason %s and message", stalled, tt.wantReason)
			case tt.want == status.CurrentStatus && stalled != nil:
				t.Fatalf("Stalled = %+v on a %s exception", stalled, tt.wantReason)
			}
			if tt.fix == "" {
				return
			}
			noErr(t, yaml.UnmarshalStrict([]byte(tt.fix), &pe.Spec))
			pe.Generation++
			noErr(t, f.c.Update(ctx, pe))
			if res := kstatusOf(t, pe); res.Status != status.InProgressStatus {
				t.Fatalf("kstatus of a generation not judged yet: %s, want InProgress", res.Status)
			}
			_, err = f.r.Reconcile(ctx, req)
			noErr(t, err)
			noErr(t, f.c.Get(ctx, req.NamespacedName, pe))
			if res := kstatusOf(t, pe); res.Status != status.CurrentStatus {
				t.Fatalf("kstatus after the fix: %s (%s), want Current", res.Status, res.Message)
			}
			if c := meta.FindStatusCondition(pe.Status.Conditions, policyv1alpha1.ConditionStalled); c != nil {
				t.Fatalf("Stalled after the fix: %+v", c)
			}
			if c := pe.Status.Conditions[0]; c.Type != policyv1alpha1.ConditionReady {
				t.Errorf("the first condition is %s; Ready stays first (kubectl wait --for=jsonpath={.status.conditions[0].type}=Ready)", c.Type)
			}
		})
	}
}

// TestMissingPolicyKstatus: an exception naming a policy that does not
// exist is in progress for missingPolicyGrace after its creation (a GitOps
// tool applying a policy with its exceptions meets that for a moment), and
// the reconciler asks to look again then; from then on it is Stalled, and
// kstatus says Failed.
func TestMissingPolicyKstatus(t *testing.T) {
	ctx := context.Background()
	pe := exceptionNaming("team", "typo", "missing", "")
	f := newExceptionFixture(t, pe)
	pe.CreationTimestamp = metav1.NewTime(f.clk.Now())
	noErr(t, f.c.Update(ctx, pe))
	// The policy controller has looked for "missing" and found nothing.
	f.r.sync.done(policyKey("missing"))
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pe)}

	res, err := f.r.Reconcile(ctx, req)
	noErr(t, err)
	noErr(t, f.c.Get(ctx, req.NamespacedName, pe))
	if c := meta.FindStatusCondition(pe.Status.Conditions, policyv1alpha1.ConditionReady); c == nil || c.Reason != policyv1alpha1.ReasonPolicyNotFound {
		t.Fatalf("Ready = %+v, want PolicyNotFound", c)
	}
	if got := kstatusOf(t, pe); got.Status != status.InProgressStatus {
		t.Fatalf("kstatus just after creation: %s (%s), want InProgress", got.Status, got.Message)
	}
	// (The API server keeps creationTimestamp to the second.)
	if want := pe.CreationTimestamp.Add(missingPolicyGrace).Sub(f.clk.Now()) + time.Millisecond; res.RequeueAfter != want {
		t.Fatalf("RequeueAfter = %s, want %s (when the wait ends)", res.RequeueAfter, want)
	}

	f.clk.Step(res.RequeueAfter)
	_, err = f.r.Reconcile(ctx, req)
	noErr(t, err)
	noErr(t, f.c.Get(ctx, req.NamespacedName, pe))
	if got := kstatusOf(t, pe); got.Status != status.FailedStatus {
		t.Fatalf("kstatus after the grace: %s (%s), want Failed", got.Status, got.Message)
	}
}
