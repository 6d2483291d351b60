package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// What the validators answer, as the API server answers its own:
//
//   - 422 Invalid (apierrors.NewInvalid), with every field error as a cause,
//     for an object that is not valid as written: what does not compile,
//     every error at once (engine.ValidatePolicy, engine.ValidateException),
//     so that its writer fixes them all in one round;
//   - 403 Forbidden, with the reason, for a valid object that podsieve
//     refuses: a PolicyException that the guardrails of a policy it names
//     do not permit, one past the namespace's limit, or one that cannot be
//     judged yet (the index is still being built).
//
// controller-runtime answers an error that is an apierrors.APIStatus with
// its status, and any other error as 403 Forbidden.

// SecurityPolicyValidator refuses a SecurityPolicy that does not compile,
// with every error the engine finds, so that a policy is never Degraded or
// InvalidSpec through the API while the webhook serves. CEL in the CRD
// checks everything it can express first.
type SecurityPolicyValidator struct{}

var _ admission.Validator[*policyv1alpha1.SecurityPolicy] = SecurityPolicyValidator{}

// ValidateCreate refuses a new policy that does not compile.
func (SecurityPolicyValidator) ValidateCreate(_ context.Context, sp *policyv1alpha1.SecurityPolicy) (admission.Warnings, error) {
	return validatePolicy(sp)
}

// ValidateUpdate refuses a change that leaves the policy not compiling.
func (SecurityPolicyValidator) ValidateUpdate(_ context.Context, _, sp *policyv1alpha1.SecurityPolicy) (admission.Warnings, error) {
	return validatePolicy(sp)
}

// ValidateDelete admits every deletion.
func (SecurityPolicyValidator) ValidateDelete(context.Context, *policyv1alpha1.SecurityPolicy) (admission.Warnings, error) {
	return nil, nil
}

// validatePolicy refuses a policy that does not compile, 422 with every
// error, and warns about entries that are easy to spoof
// (engine.PolicyWarnings).
func validatePolicy(sp *policyv1alpha1.SecurityPolicy) (admission.Warnings, error) {
	if errs := engine.ValidatePolicy(sp); len(errs) > 0 {
		return nil, apierrors.NewInvalid(policyv1alpha1.GroupVersion.WithKind("SecurityPolicy").GroupKind(), sp.Name, errs)
	}
	return prefixed(fmt.Sprintf("SecurityPolicy %q: ", sp.Name), engine.PolicyWarnings(sp)), nil
}

// prefixed names the object in each warning: kubectl prints warnings
// without saying which object of an apply they are about.
func prefixed(prefix string, warnings []string) admission.Warnings {
	if len(warnings) == 0 {
		return nil
	}
	out := make(admission.Warnings, len(warnings))
	for i, w := range warnings {
		out[i] = prefix + w
	}
	return out
}

// PolicyExceptionValidator refuses a PolicyException that does not compile
// (a restrictedField of another control, values that can never match,
// match.namespaces outside the cluster exceptions namespace), 422 with every
// error, or that the guardrails of a policy it names refuse, 403 with the
// message its NotPermitted condition would carry. An exception naming a policy or rule that does not
// exist yet is admitted with a warning: exceptions are decoupled from the
// policies' lifecycle, and its status says PolicyNotFound until then.
type PolicyExceptionValidator struct {
	Index               *index.Index
	Clock               clock.PassiveClock
	ExceptionsNamespace string
	// MaxPerNamespace refuses the creation of a PolicyException in a
	// namespace that holds that many already; 0 sets no limit.
	MaxPerNamespace int
}

var _ admission.Validator[*policyv1alpha1.PolicyException] = &PolicyExceptionValidator{}

// ValidateCreate refuses a new exception that does not compile, that the
// guardrails of a policy it names refuse, or beyond its namespace's limit.
func (v *PolicyExceptionValidator) ValidateCreate(_ context.Context, pe *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	warnings, err := v.validate(pe)
	if err != nil {
		return warnings, err
	}
	return warnings, v.checkNamespaceLimit(pe)
}

// checkNamespaceLimit refuses a new exception in a namespace that already
// holds MaxPerNamespace of them, so that no namespace editor can make every
// replica's index, and every decision in the namespace, as large as they
// like. It counts what the index holds, in force or not (ExceptionsIn); the
// exception controller enforces the same limit on what creations this
// check missed (while the webhook was down, or at once from two clients).
func (v *PolicyExceptionValidator) checkNamespaceLimit(pe *policyv1alpha1.PolicyException) error {
	if v.MaxPerNamespace <= 0 {
		return nil
	}
	if n := v.Index.Snapshot().ExceptionsIn(pe.Namespace); n >= v.MaxPerNamespace {
		return fmt.Errorf("PolicyException %s/%s: namespace %q already holds %d PolicyExceptions, the limit (podsieve manager --max-exceptions-per-namespace=%d); "+
			"delete the ones no longer used (kubectl get podex -n %s -o wide shows MATCHED 0 for those that waive nothing now), or ask a cluster admin to raise the limit",
			pe.Namespace, pe.Name, pe.Namespace, n, v.MaxPerNamespace, pe.Namespace)
	}
	return nil
}

// ValidateUpdate refuses a change that leaves the exception not compiling
// or refused by a policy's guardrails; the namespace limit counts only
// creations.
func (v *PolicyExceptionValidator) ValidateUpdate(_ context.Context, _, pe *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	return v.validate(pe)
}

// ValidateDelete admits every deletion.
func (v *PolicyExceptionValidator) ValidateDelete(context.Context, *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	return nil, nil
}

func (v *PolicyExceptionValidator) validate(pe *policyv1alpha1.PolicyException) (admission.Warnings, error) {
	e, err := engine.CompileException(pe, v.ExceptionsNamespace)
	if err != nil {
		// Not in the common path: an exception that compiles is
		// validated once.
		return nil, apierrors.NewInvalid(policyv1alpha1.GroupVersion.WithKind("PolicyException").GroupKind(), pe.Name,
			engine.ValidateException(pe, v.ExceptionsNamespace))
	}
	if !v.Index.Ready() {
		return nil, fmt.Errorf("PolicyException %s/%s: podsieve is starting and cannot check the policies' guardrails yet; retry in a few seconds", pe.Namespace, pe.Name)
	}
	st := e.State(v.Index.Snapshot().Policy, v.Clock.Now())
	warnings := prefixed(fmt.Sprintf("PolicyException %s/%s: ", pe.Namespace, pe.Name), engine.ExceptionWarnings(pe))
	switch st.Reason {
	case policyv1alpha1.ReasonNotPermitted:
		return nil, fmt.Errorf("PolicyException %s/%s: %s", pe.Namespace, pe.Name, st.Message)
	case policyv1alpha1.ReasonActive:
		return warnings, nil
	}
	return append(admission.Warnings{fmt.Sprintf("PolicyException %s/%s will not apply: %s", pe.Namespace, pe.Name, st.Message)}, warnings...), nil
}
