package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/podsieve/podsieve/internal/index"
)

// NamespaceReconciler keeps the index's copy of every namespace's labels,
// which namespaceSelectors match on the request path.
type NamespaceReconciler struct {
	client.Client
	Index *index.Index
	sync  *syncTracker
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile puts a namespace's labels in the index, or takes a deleted
// namespace out of it.
func (r *NamespaceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, req.NamespacedName, &ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.Index.DeleteNamespace(req.Name)
	} else {
		r.Index.SetNamespace(ns.Name, ns.Labels)
	}
	r.sync.done(namespaceKey(req.Name))
	return ctrl.Result{}, nil
}

func (r *NamespaceReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Namespace{}).
		Named("namespace").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}
