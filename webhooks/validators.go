package webhooks

import (
	"context"
	"fmt"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// SecurityPolicyValidator refuses a SecurityPolicy that does not compile,
// with the engine's message, so that a policy is never Degraded or
// InvalidSpec through the API while the webhook serves. CEL in the CRD
// checks everything it can express first.
type SecurityPolicyValidator struct{}

func (SecurityPolicyValidator) ValidateCreate(_ context.Context, sp *policyv1alpha1.SecurityPolicy) (admission.Warnings, error) {
	return nil, validatePolicy(sp)
}

func (SecurityPolicyValidator) ValidateUpdate(_ context.Context, _, sp *policyv1alpha1.SecurityPolicy) (admission.Warnings, error) {
	return nil, validatePolicy(sp)
}

func (SecurityPolicyValidator) ValidateDelete(context.Context, *policyv1alpha1.SecurityPolicy) (admission.Warnings, error) {
	return nil, nil
}

func validatePolicy(sp *policyv1alpha1.SecurityPolicy) error {
	if _, err := engine.CompilePolicy(sp); err != nil {
		return fmt.Errorf("SecurityPolicy %q: %w", sp.Name, err)
	}
	return nil
}

// PolicyExceptionValidator refuses a PolicyException that does not compile
// (a restrictedField of another control, values that can never match,
// match.namespaces outside the cluster exceptions namespace) or that the
// guardrails of a policy it names refuse, with the message its NotPermitted
// condition would carry. An exception naming a policy or rule that does not
// exist yet is admitted with a warning: exceptions are decoupled from the
// policies' lifecycle, and its status says PolicyNotFound until then.
type PolicyExceptionValidator struct {
	Index               *index.Index
	Clock               clock.PassiveClock
	ExceptionsNamespace string
}

func (v *PolicyExceptionValidator) ValidateCreate(_ context.Context, pe *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	return v.validate(pe)
}

func (v *PolicyExceptionValidator) ValidateUpdate(_ context.Context, _, pe *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	return v.validate(pe)
}

func (v *PolicyExceptionValidator) ValidateDelete(context.Context, *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	return nil, nil
}

func (v *PolicyExceptionValidator) validate(pe *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	e, err := engine.CompileException(pe, v.ExceptionsNamespace)
	if err != nil {
		return nil, fmt.Errorf("PolicyException %s/%s: %w", pe.Namespace, pe.Name, err)
	}
	if !v.Index.Ready() {
		return nil, fmt.Errorf("PolicyException %s/%s: podsieve is starting and cannot check the policies' guardrails yet; retry in a few seconds", pe.Namespace, pe.Name)
	}
	st := e.State(v.Index.Snapshot().Policy, v.Clock.Now())
	switch st.Reason {
	case policyv1alpha1.ReasonNotPermitted:
		return nil, fmt.Errorf("PolicyException %s/%s: %s", pe.Namespace, pe.Name, st.Message)
	case policyv1alpha1.ReasonActive:
		return nil, nil
	}
	return admission.Warnings{fmt.Sprintf("PolicyException %s/%s will not apply: %s", pe.Namespace, pe.Name, st.Message)}, nil
}
