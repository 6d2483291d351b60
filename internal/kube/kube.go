// Package kube holds the few helpers over controller-runtime's client that
// the reconcilers (package controllers) and the background scan
// (controllers/background) share, so that neither keeps a copy of the
// other's. It must not import podsieve's controllers, webhooks or cmd.
package kube

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

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
// SecurityPolicy, as owner, the writer that owns that condition type (the
// background scan's Scanned, the admission policies' EnforcedByAPIServer);
// want nil removes it. The transition time is kept while the status stays,
// else now. Nothing is written when the condition already says the same; a
// policy deleted meanwhile is not an error.
func ApplyPolicyCondition(ctx context.Context, c client.Client, sp *policyv1alpha1.SecurityPolicy, owner StatusOwner, conditionType string, want *metav1.Condition, now time.Time) error {
	status := sp.Status.DeepCopy()
	if want == nil {
		meta.RemoveStatusCondition(&status.Conditions, conditionType)
	} else {
		cond := *want
		cond.Type = conditionType
		// SetStatusCondition keeps the transition time while the status
		// stays.
		cond.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		meta.SetStatusCondition(&status.Conditions, cond)
	}
	_, err := owner.Apply(ctx, c, sp, status)
	return err
}
