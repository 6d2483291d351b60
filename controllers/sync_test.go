package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestSyncTracker: the index turns ready only once every object the caches
// held has been reconciled, counting those reconciled before the listing.
func TestSyncTracker(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(
		&policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}},
		&policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "e"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
	).Build()
	ix := index.New("podsieve-system")
	tr := newSyncTracker(ix)

	tr.done(policyKey("p")) // reconciled before the caches were listed
	if ix.Ready() {
		t.Fatal("ready before the caches were listed")
	}
	if err := tr.listInitial(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	tr.done(namespaceKey("a"))
	tr.done(exceptionKey("b", "e")) // not one the caches held
	if ix.Ready() {
		t.Fatal("ready with exception a/e not reconciled yet")
	}
	tr.done(exceptionKey("a", "e"))
	if !ix.Ready() {
		t.Fatal("not ready after every listed object was reconciled")
	}
	if !tr.isProcessed(policyKey("p")) || tr.isProcessed(policyKey("q")) {
		t.Error("isProcessed does not track reconciles")
	}
}

// TestSyncTrackerEmptyCluster: with nothing to reconcile, listing is enough.
func TestSyncTrackerEmptyCluster(t *testing.T) {
	ix := index.New("podsieve-system")
	if err := newSyncTracker(ix).listInitial(context.Background(), fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build()); err != nil {
		t.Fatal(err)
	}
	if !ix.Ready() {
		t.Fatal("an empty cluster never becomes ready")
	}
}
