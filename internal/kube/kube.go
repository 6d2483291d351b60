// Package kube holds the few helpers over controller-runtime's client that
// the reconcilers (package controllers) and the background scan
// (controllers/background) share, so that neither keeps a copy of the
// other's. It must not import podsieve's controllers, webhooks or cmd.
package kube

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// PatchStatus applies set to obj and patches the status subresource when
// that changed anything. It reports whether it patched; an object deleted
// meanwhile is not an error.
func PatchStatus(ctx context.Context, c client.Client, obj client.Object, set func()) (bool, error) {
	return patchStatus(ctx, c, obj, set, client.MergeFrom)
}

// PatchStatusLocked is PatchStatus for an object whose status.conditions
// have two writers (a SecurityPolicy: the policy controller's Ready, the
// background scan's Scanned, by server-side apply). A merge patch replaces
// the list whole, so one computed from a stale copy would write the other
// writer's older condition back; this patch carries the resourceVersion
// read and fails with a conflict instead (apierrors.IsConflict), and the
// caller reads again.
func PatchStatusLocked(ctx context.Context, c client.Client, obj client.Object, set func()) (bool, error) {
	return patchStatus(ctx, c, obj, set, func(o client.Object) client.Patch {
		return client.MergeFromWithOptions(o, client.MergeFromWithOptimisticLock{})
	})
}

func patchStatus(ctx context.Context, c client.Client, obj client.Object, set func(), patch func(client.Object) client.Patch) (bool, error) {
	orig := obj.DeepCopyObject().(client.Object)
	set()
	if apiequality.Semantic.DeepEqual(orig, obj) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, patch(orig)); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// ListPoliciesAndExceptions lists every SecurityPolicy and PolicyException.
func ListPoliciesAndExceptions(ctx context.Context, c client.Reader) (*policyv1alpha1.SecurityPolicyList, *policyv1alpha1.PolicyExceptionList, error) {
	var policies policyv1alpha1.SecurityPolicyList
	if err := c.List(ctx, &policies); err != nil {
		return nil, nil, fmt.Errorf("list SecurityPolicies: %w", err)
	}
	var exceptions policyv1alpha1.PolicyExceptionList
	if err := c.List(ctx, &exceptions); err != nil {
		return nil, nil, fmt.Errorf("list PolicyExceptions: %w", err)
	}
	return &policies, &exceptions, nil
}
