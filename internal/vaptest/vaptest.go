// Package vaptest evaluates ValidatingAdmissionPolicies
// (admissionregistration.k8s.io/v1) in-process, deciding an admission request
// as the kube-apiserver of the k8s.io/apiserver version in go.mod would. Test
// support only: production code must not import it. What it shares with
// production code (the background scan's cross-check) is internal/vap's:
// compiling a policy, its defaults, its parameters and the walk through the
// hooks.
//
// The decision is the library's, not ours. Admit hands the compiled policies
// to the apiserver's own ValidatingAdmissionPolicy dispatcher
// (validating.NewDispatcher over matching.NewMatcher), with the per-policy
// runtime cost budget (celconfig.RuntimeCELCostBudget) and the per-call limit
// and strict cost of the plugin's CEL environment. Result.Allowed, Warnings,
// Audit and AuditAnnotations are what that dispatcher produced. Because the
// dispatcher answers with only its first denial and drops errors ignored by
// failurePolicy Ignore, Admit walks the same hooks a second time with the same
// exported parts (PolicyMatcher, generic.CollectParams, Validator.Validate) to
// list every denial and every error; the two walks must agree on Allowed and
// on the first denial, and a disagreement is reported as an error.
//
// What a real cluster has and this package does not:
//   - matchPolicy Equivalent is evaluated as Exact: there is no discovery, so
//     no resource has equivalents (the dispatcher is given an empty
//     EquivalentResourceRegistry);
//   - the scope of a paramKind comes from the objects given to New: it is
//     cluster-scoped when objects of that kind are given and none has a
//     namespace, and namespaced otherwise (where the apiserver asks its
//     RESTMapper);
//   - the resources the apiserver excludes from all policies (token and
//     access reviews, the admission configuration kinds) are not excluded;
//   - defaulting is the small set in setPolicyDefaults and setBindingDefaults,
//     the defaults the API server stores for these kinds; create-time
//     validation is limited to compiling every expression (New fails on a
//     compile error unless told otherwise) and requiring
//     paramRef.parameterNotFoundAction.
package vaptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podsieve/podsieve/internal/vap"
)

// validationFailureKey is the audit annotation under which the dispatcher
// publishes the failures of bindings with the Audit action.
const validationFailureKey = "validation.policy.admission.k8s.io/validation_failure"

var (
	policyGVK    = admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy")
	bindingGVK   = admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding")
	namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")
)

// Cluster is a set of ValidatingAdmissionPolicies, their bindings, the
// parameter objects they read and the namespaces, compiled once. It is safe
// for concurrent use by Admit.
type Cluster struct {
	hooks     []validating.PolicyHook
	matcher   generic.PolicyMatcher
	objIfaces admission.ObjectInterfaces
}

// Option changes how New reads its objects.
type Option func(*options)

type options struct {
	keepCompileErrors bool
}

// KeepCompileErrors makes New accept policies whose expressions do not
// compile. Admit then treats them as the apiserver treats such a stored
// policy: every evaluation is an error, to which failurePolicy applies.
func KeepCompileErrors() Option {
	return func(o *options) { o.keepCompileErrors = true }
}

// New compiles a cluster from objs: ValidatingAdmissionPolicies,
// ValidatingAdmissionPolicyBindings, Namespaces, and any other object, each
// of which (Namespaces included) can be read as a parameter by a policy whose
// paramKind names its apiVersion and kind. Policies and bindings are kept in
// the order given, which is the order of evaluation. New fails, naming the
// policy and the field, when an object cannot be read, when a binding's
// paramRef has no parameterNotFoundAction, or (unless KeepCompileErrors)
// when an expression does not compile.
func New(objs []*unstructured.Unstructured, opts ...Option) (*Cluster, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var (
		policies []*admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
		errs     []error
	)
	var namespaces []*corev1.Namespace
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		switch gvk {
		case policyGVK:
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := fromUnstructured(u, p); err != nil {
				errs = append(errs, err)
				continue
			}
			vap.SetPolicyDefaults(p)
			if !o.keepCompileErrors {
				errs = append(errs, vap.CompileErrors(p)...)
			}
			policies = append(policies, p)
		case bindingGVK:
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			if err := fromUnstructured(u, b); err != nil {
				errs = append(errs, err)
				continue
			}
			if b.Spec.ParamRef != nil && b.Spec.ParamRef.ParameterNotFoundAction == nil {
				errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicyBinding %q: spec.paramRef.parameterNotFoundAction: Required value", b.Name))
				continue
			}
			vap.SetBindingDefaults(b)
			bindings = append(bindings, b)
		case namespaceGVK:
			ns := &corev1.Namespace{}
			if err := fromUnstructured(u, ns); err != nil {
				errs = append(errs, err)
				continue
			}
			namespaces = append(namespaces, ns)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// The namespace matcher asks the client when its lister misses; an
	// empty clientset answers NotFound, as the apiserver's storage would.
	matcher, err := vap.Matcher(namespaces, fake.NewSimpleClientset())
	if err != nil {
		return nil, err
	}
	c := &Cluster{matcher: matcher, objIfaces: vap.ObjectInterfaces()}
	for _, p := range policies {
		c.hooks = append(c.hooks, vap.WithParams(vap.Hook(p, bindings), objs))
	}
	return c, nil
}

func fromUnstructured(u *unstructured.Unstructured, into runtime.Object) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		return fmt.Errorf("%s %q: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// Request is one admission request, as the apiserver's admission attributes
// describe it.
type Request struct {
	// Operation is admission.Create, Update, Delete or Connect.
	Operation admission.Operation
	// Object is the object after the operation; nil for Delete.
	Object *unstructured.Unstructured
	// OldObject is the object before the operation; nil for Create.
	OldObject *unstructured.Unstructured
	// Namespace is the request's namespace; empty for a cluster-scoped
	// resource. Its Namespace object must have been given to New.
	Namespace string
	// Name is the object's name; empty means Object's or OldObject's name.
	Name string
	// Resource and Subresource are the resource requested, such as
	// {"", "v1", "pods"} and "ephemeralcontainers".
	Resource    schema.GroupVersionResource
	Subresource string
	// Kind is the kind of Object; empty means Object's (or OldObject's)
	// apiVersion and kind.
	Kind schema.GroupVersionKind
	// UserInfo is the requesting user; nil for an anonymous request.
	UserInfo user.Info
	// DryRun marks a dry-run request.
	DryRun bool
	// Authorizer answers the policy's `authorizer` checks; nil answers
	// every check with no opinion (nothing is allowed).
	Authorizer authorizer.UnconditionalAuthorizer
}

// Result is the admission decision and its explanation.
type Result struct {
	// Allowed is false when a binding with the Deny action fails a validation,
	// or an error occurs under failurePolicy Fail.
	Allowed bool
	// Denials are the messages of the decisions that denied the request, in
	// evaluation order, worded as the apiserver words its denial:
	// "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: msg".
	Denials []string
	// Warnings are the warnings the apiserver returns for bindings with the
	// Warn action.
	Warnings []string
	// Audit are the failures the apiserver records in the audit event for
	// bindings with the Audit action: "ValidatingAdmissionPolicy 'p' with
	// binding 'b': msg".
	Audit []string
	// AuditAnnotations are the audit annotations the apiserver adds to the
	// audit event, including the policies' auditAnnotations ("p/key").
	AuditAnnotations map[string]string
	// Errors are the errors met while evaluating, each an *EvalError that
	// says which failurePolicy applied, except a missing Namespace, which
	// fails the request whatever the policy. Under Fail an error also denies
	// (and is among Denials) if the binding has the Deny action or the error
	// is a configuration error (such as a missing param under
	// parameterNotFoundAction Deny); under Ignore it does not deny. A
	// matchConditions error under Ignore is not listed: the library's
	// matchConditions matcher applies Ignore itself and drops the error.
	Errors []error
}

// EvalError is an error met while evaluating a policy: a compile error, a
// runtime error, an exceeded cost budget, a missing parameter under
// parameterNotFoundAction Deny, a configuration error.
type EvalError struct {
	Policy        string
	Binding       string // empty for an error of the policy itself
	FailurePolicy admissionregistrationv1.FailurePolicyType
	Err           error
}

func (e *EvalError) Error() string {
	where := fmt.Sprintf("ValidatingAdmissionPolicy %q", e.Policy)
	if e.Binding != "" {
		where += fmt.Sprintf(" with binding %q", e.Binding)
	}
	return fmt.Sprintf("%s (failurePolicy %s): %v", where, e.FailurePolicy, e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// ErrDisagreement is reported in Result.Errors when the explanation Admit
// computed does not agree with the decision of the apiserver's dispatcher.
// Result.Allowed is then the dispatcher's decision. It means a bug in this
// package.
var ErrDisagreement = errors.New("vaptest: explanation disagrees with the apiserver's dispatcher")

// Admit decides the request as the apiserver's ValidatingAdmissionPolicy
// admission plugin would and explains the decision.
func (c *Cluster) Admit(ctx context.Context, r Request) Result {
	authz := r.Authorizer
	if authz == nil {
		authz = vap.NoOpinion{}
	}
	attrs := c.attributes(r)
	matcher := c.matcher

	// The decision: the apiserver's dispatcher.
	warnings := &warningRecorder{}
	dispatchErr := validating.NewDispatcher(authz, matcher).Dispatch(warning.WithWarningRecorder(ctx, warnings), attrs, c.objIfaces, c.hooks)
	res := Result{Allowed: dispatchErr == nil, Warnings: warnings.texts, AuditAnnotations: attrs.annotations}
	if v, ok := attrs.annotations[validationFailureKey]; ok {
		var failures []validating.ValidationFailureValue
		if err := json.Unmarshal([]byte(v), &failures); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("vaptest: read audit annotation %s: %w", validationFailureKey, err))
		}
		for _, f := range failures {
			res.Audit = append(res.Audit, fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s': %s", f.Policy, f.Binding, f.Message))
		}
	}

	// The explanation: the same hooks through the same parts, on a fresh copy
	// of the attributes so that annotations are not published twice.
	ex := c.explain(ctx, c.attributes(r), matcher, authz)
	res.Denials = ex.denials
	res.Errors = append(res.Errors, ex.errors...)
	if err := disagreement(dispatchErr, ex); err != nil {
		res.Errors = append(res.Errors, err)
	}
	return res
}

func (c *Cluster) attributes(r Request) *recordingAttributes {
	// A nil *Unstructured in a runtime.Object is not a nil object.
	var obj, old runtime.Object
	name, kind := r.Name, r.Kind
	for _, u := range []*unstructured.Unstructured{r.OldObject, r.Object} {
		if u == nil {
			continue
		}
		if name == "" {
			name = u.GetName()
		}
		if kind.Empty() {
			kind = u.GroupVersionKind()
		}
	}
	if r.Object != nil {
		obj = r.Object
	}
	if r.OldObject != nil {
		old = r.OldObject
	}
	return &recordingAttributes{
		Attributes:  admission.NewAttributesRecord(obj, old, kind, r.Namespace, name, r.Resource, r.Subresource, r.Operation, nil, r.DryRun, r.UserInfo),
		annotations: map[string]string{},
	}
}

// disagreement is an ErrDisagreement when the explanation does not agree
// with the dispatcher's decision dispatchErr (nil: allowed).
func disagreement(dispatchErr error, ex explanation) error {
	explainedAllowed := len(ex.denials) == 0 && ex.fatal == nil
	switch {
	case dispatchErr == nil && !explainedAllowed:
		return fmt.Errorf("%w: dispatcher allowed, explanation denied", ErrDisagreement)
	case dispatchErr != nil && explainedAllowed:
		return fmt.Errorf("%w: dispatcher denied (%w), explanation allowed", ErrDisagreement, dispatchErr)
	case dispatchErr != nil && len(ex.denials) > 0 && !strings.Contains(dispatchErr.Error(), ex.denials[0]):
		return fmt.Errorf("%w: dispatcher denied with %q, explanation first denial %q", ErrDisagreement, dispatchErr.Error(), ex.denials[0])
	}
	return nil
}

type explanation struct {
	denials []string
	errors  []error
	fatal   error // an error the dispatcher returns as is, not as a denial
}

// explain walks the hooks as validating's dispatcher does and records every
// decision instead of stopping at the first denial. It decides nothing: Admit
// compares it with the dispatcher.
func (c *Cluster) explain(ctx context.Context, a admission.Attributes, m generic.PolicyMatcher, authz authorizer.UnconditionalAuthorizer) explanation {
	var ex explanation
	w := vap.Walk(ctx, c.hooks, m, a, c.objIfaces, authz)
	for _, st := range w.Steps {
		if st.ConfigError != nil {
			ex.configError(st.Policy, st.Binding, st.ConfigError)
			continue
		}
		for _, vr := range st.Results {
			ex.result(st.Policy, st.Binding, vr)
		}
	}
	if w.NamespaceErr != nil {
		ex.fatal = w.NamespaceErr
		ex.errors = append(ex.errors, fmt.Errorf("namespace %q (give its Namespace object to New): %w", w.Namespace, w.NamespaceErr))
	}
	return ex
}

// result records the denials and evaluation errors of one validator result
// of policy p under binding b.
func (ex *explanation) result(p *validating.Policy, b *validating.PolicyBinding, vr validating.ValidateResult) {
	for _, d := range vr.Decisions {
		if d.Evaluation == validating.EvalError {
			ex.evalError(p, b, errors.New(d.Message))
		}
		if d.Action == validating.ActionDeny && hasAction(b, admissionregistrationv1.Deny) {
			ex.deny(p, b, d.Message)
		}
	}
	for _, ann := range vr.AuditAnnotations {
		if ann.Error == "" {
			continue
		}
		ex.evalError(p, b, fmt.Errorf("auditAnnotations[%q]: %s", ann.Key, ann.Error))
		if ann.Action == validating.AuditAnnotationActionError {
			ex.deny(p, b, ann.Error)
		}
	}
}

// deny records a denial in the dispatcher's words.
func (ex *explanation) deny(p *validating.Policy, b *validating.PolicyBinding, msg string) {
	if b == nil {
		ex.denials = append(ex.denials, fmt.Sprintf("ValidatingAdmissionPolicy '%s' denied request: %s", p.Name, msg))
		return
	}
	ex.denials = append(ex.denials, fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", p.Name, b.Name, msg))
}

// evalError records an error of policy p, under binding b when b is not nil.
func (ex *explanation) evalError(p *validating.Policy, b *validating.PolicyBinding, err error) {
	e := &EvalError{Policy: p.Name, FailurePolicy: failurePolicy(p), Err: err}
	if b != nil {
		e.Binding = b.Name
	}
	ex.errors = append(ex.errors, e)
}

// configError records a configuration error, which denies under Fail
// whatever the binding's validationActions.
func (ex *explanation) configError(p *validating.Policy, b *validating.PolicyBinding, err error) {
	ex.evalError(p, b, err)
	if failurePolicy(p) == admissionregistrationv1.Ignore {
		return
	}
	if b == nil {
		ex.deny(p, b, fmt.Errorf("failed to configure policy: %w", err).Error())
	} else {
		ex.deny(p, b, fmt.Errorf("failed to configure binding: %w", err).Error())
	}
}

func failurePolicy(p *validating.Policy) admissionregistrationv1.FailurePolicyType {
	if p.Spec.FailurePolicy == nil {
		return admissionregistrationv1.Fail
	}
	return *p.Spec.FailurePolicy
}

func hasAction(b *validating.PolicyBinding, action admissionregistrationv1.ValidationAction) bool {
	for _, a := range b.Spec.ValidationActions {
		if a == action {
			return true
		}
	}
	return false
}

// recordingAttributes keeps the audit annotations the dispatcher adds.
type recordingAttributes struct {
	admission.Attributes
	annotations map[string]string
}

func (r *recordingAttributes) AddAnnotation(key, value string) error {
	if err := r.Attributes.AddAnnotation(key, value); err != nil {
		return err
	}
	r.annotations[key] = value
	return nil
}

type warningRecorder struct{ texts []string }

func (w *warningRecorder) AddWarning(_, text string) { w.texts = append(w.texts, text) }
