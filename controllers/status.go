package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// patchStatus applies set to obj and patches the status subresource when
// that changed anything. It reports whether it patched; a deleted object is
// not an error.
func patchStatus(ctx context.Context, c client.Client, obj client.Object, set func()) (bool, error) {
	orig := obj.DeepCopyObject().(client.Object)
	set()
	if equality.Semantic.DeepEqual(orig, obj) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// setReady sets the Ready condition, always stamped with the generation it
// describes, and reports whether its reason or message changed: what is worth
// an event.
func setReady(conds *[]metav1.Condition, generation int64, ready bool, reason, message string) (news bool) {
	message = truncate(message, 32768)
	c := meta.FindStatusCondition(*conds, policyv1alpha1.ConditionReady)
	news = c == nil || c.Reason != reason || c.Message != message
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               policyv1alpha1.ConditionReady,
		Status:             status,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            message,
	})
	return news
}

// truncate keeps a message within the API's limit for condition messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
