package controllers

import (
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

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

// missingPolicyGrace is how long after its creation an exception that
// names a policy or rule that does not exist is in progress rather than
// Stalled: a GitOps tool applying a policy with its exceptions meets that
// for a moment, and Stalled then would fail its health check on a normal
// first apply. After it, the name is taken as a mistake a person must fix.
const missingPolicyGrace = time.Minute

// exceptionStalled says whether an exception in state reason waits for a
// person: every reason it is not in force for but Deleting (kstatus says
// Terminating then), and a missing policy or rule only once the exception
// is older than missingPolicyGrace. recheck, when positive, is when the
// answer may change without anything else changing.
func exceptionStalled(ready bool, reason string, created, now time.Time) (stalled bool, recheck time.Duration) {
	switch {
	case ready || reason == policyv1alpha1.ReasonDeleting:
		return false, 0
	case reason == policyv1alpha1.ReasonPolicyNotFound || reason == policyv1alpha1.ReasonRuleNotFound:
		if until := created.Add(missingPolicyGrace).Sub(now); until > 0 {
			return false, until + time.Millisecond
		}
	}
	return true, 0
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

// requeueOnConflict turns the conflict of a locked status apply
// (kube.StatusOwner.Locked: the object changed since the cache copy was
// read, a newer spec or another writer's part) into a requeue, which reads
// it again, rather than writing the status from the older copy.
func requeueOnConflict(result ctrl.Result, err error) (ctrl.Result, error) {
	if !apierrors.IsConflict(err) {
		return result, err
	}
	if result.RequeueAfter == 0 || result.RequeueAfter > time.Second {
		result.RequeueAfter = time.Second
	}
	return result, nil
}
