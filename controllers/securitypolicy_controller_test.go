package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
