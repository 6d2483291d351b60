// Package kube holds the few helpers over controller-runtime's client that
// the reconcilers (package controllers) and the background scan
// (controllers/background) share, so that neither keeps a copy of the
// other's. It must not import podsieve's controllers, webhooks or cmd.
package kube

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// ApplyPolicyCondition makes want the condition of its type on a
// SecurityPolicy, by server-side apply under fieldManager, so that each
// writer of a condition of its own (the background scan's Scanned, the
// admission policies' EnforcedByAPIServer) owns only that entry of
// status.conditions. want nil removes the condition (a JSON patch that
// first tests it is still where the copy has it: a server-side apply of no
// conditions would send an empty status, which the schema refuses). The
// transition time is kept while the status stays, else now. Nothing is
// written when the condition already says the same; a policy deleted
// meanwhile is not an error.
func ApplyPolicyCondition(ctx context.Context, c client.Client, sp *policyv1alpha1.SecurityPolicy, conditionType string, want *metav1.Condition, now time.Time, fieldManager string) error {
	have := meta.FindStatusCondition(sp.Status.Conditions, conditionType)
	if want == nil && have == nil {
		return nil
	}
	if want == nil {
		i := slices.IndexFunc(sp.Status.Conditions, func(c metav1.Condition) bool { return c.Type == conditionType })
		patch := fmt.Sprintf(`[{"op":"test","path":"/status/conditions/%d/type","value":%q},{"op":"remove","path":"/status/conditions/%d"}]`,
			i, conditionType, i)
		return client.IgnoreNotFound(c.Status().Patch(ctx, sp, client.RawPatch(types.JSONPatchType, []byte(patch))))
	}
	cond := *want
	cond.Type = conditionType
	cond.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	if have != nil {
		if have.Status == cond.Status && have.Reason == cond.Reason && have.Message == cond.Message && have.ObservedGeneration == cond.ObservedGeneration {
			return nil
		}
		if have.Status == cond.Status {
			cond.LastTransitionTime = have.LastTransitionTime
		}
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(policyv1alpha1.GroupVersion.String())
	u.SetKind("SecurityPolicy")
	u.SetName(sp.Name)
	u.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": cond.Type, "status": string(cond.Status), "reason": cond.Reason, "message": cond.Message,
		"observedGeneration": cond.ObservedGeneration, "lastTransitionTime": cond.LastTransitionTime.UTC().Format(time.RFC3339),
	}}}
	return client.IgnoreNotFound(c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fieldManager), client.ForceOwnership))
}
