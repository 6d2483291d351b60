package controllers

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

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

// setStalled sets the Stalled condition (kstatus' abnormal-true one) with
// the Ready condition's reason and message when stalled, and removes it
// otherwise.
func setStalled(conds *[]metav1.Condition, generation int64, stalled bool, reason, message string) {
	if !stalled {
		meta.RemoveStatusCondition(conds, policyv1alpha1.ConditionStalled)
		return
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               policyv1alpha1.ConditionStalled,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            truncate(message, 32768),
	})
}

// exceptionStalled says whether an exception in state reason waits for a
// person: every reason it is not in force for but Deleting (kstatus says
// Terminating then) and a policy or rule not found, which a GitOps tool
// applying policies and exceptions together meets for a moment (the
// exception is judged again when the policy arrives): Stalled would fail
// its health check on a normal first apply.
func exceptionStalled(ready bool, reason string) bool {
	switch reason {
	case policyv1alpha1.ReasonDeleting, policyv1alpha1.ReasonPolicyNotFound, policyv1alpha1.ReasonRuleNotFound:
		return false
	}
	return !ready
}

// truncate keeps s within n bytes (a field's limit in the API: 32768 for a
// condition message), ending it with "..." when it cuts. It cuts between characters,
// never inside one, so that what is left is still valid UTF-8.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
