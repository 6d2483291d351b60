// Package vap evaluates ValidatingAdmissionPolicies
// (admissionregistration.k8s.io/v1) in process, with the kube-apiserver's own
// admission libraries (k8s.io/apiserver at the version in go.mod): the same
// compiler and CEL environment, the same matchers, the same parameter
// collection and validator, with the per-policy runtime cost budget. The
// decision is the library's, not ours.
//
// Two callers: the background scan decides each object with the compiled
// form of the policies as well as with the engine, and counts where the two
// differ; internal/vaptest builds its emulation of the API server's
// admission plugin (the dispatcher's decision and its explanation) on Walk.
package vap

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// NamespaceGVK is the kind of Namespace objects, which no policy is matched
// against with a namespace of its own.
var NamespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")

// Hook compiles a ValidatingAdmissionPolicy, with the defaults the API server
// stores for it (SetPolicyDefaults), and its bindings into what the
// admission plugin evaluates. A compile error is not returned: as for a
// stored policy, every evaluation is then an error, to which failurePolicy
// applies (CompileErrors names them). The hook reads no parameters until
// WithParams gives it some.
func Hook(p *admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) validating.PolicyHook {
	p = p.DeepCopy()
	SetPolicyDefaults(p)
	hook := validating.PolicyHook{Policy: p, Evaluator: compilePolicy(p)}
	for _, b := range bindings {
		if b.Spec.PolicyName == p.Name {
			b = b.DeepCopy()
			SetBindingDefaults(b)
			hook.Bindings = append(hook.Bindings, b)
		}
	}
	return hook
}

// WithParams returns the hook reading its parameters from objs: the objects
// of its paramKind, given in full. The paramKind's scope is cluster when objs
// has objects and none has a namespace, namespaced otherwise (where the API
// server asks its RESTMapper).
func WithParams(hook validating.PolicyHook, objs []*unstructured.Unstructured) validating.PolicyHook {
	pk := hook.Policy.Spec.ParamKind
	if pk == nil {
		return hook
	}
	gv, err := schema.ParseGroupVersion(pk.APIVersion)
	if err != nil {
		// The API server reports this as the policy's configuration
		// error at admission time, under its failurePolicy.
		hook.ConfigurationError = fmt.Errorf("paramKind apiVersion %q: %w", pk.APIVersion, err)
		return hook
	}
	var mine []*unstructured.Unstructured
	for _, u := range objs {
		if u.GroupVersionKind() == gv.WithKind(pk.Kind) {
			mine = append(mine, u)
		}
	}
	hook.ParamInformer, hook.ParamScope = newParamInformer(gv.WithKind(pk.Kind), mine)
	return hook
}

// SetPolicyDefaults applies the defaults the API server stores for a
// ValidatingAdmissionPolicy (k8s.io/kubernetes pkg/apis/admissionregistration/v1
// defaults.go, which this module cannot import).
func SetPolicyDefaults(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	setMatchResourcesDefaults(p.Spec.MatchConstraints)
}

// SetBindingDefaults applies the defaults the API server stores for a
// ValidatingAdmissionPolicyBinding.
func SetBindingDefaults(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	setMatchResourcesDefaults(b.Spec.MatchResources)
}

func setMatchResourcesDefaults(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		equivalent := admissionregistrationv1.Equivalent
		m.MatchPolicy = &equivalent
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
}

// compositionEnv is the environment the plugin compiles with: the base
// environment (per-call cost limit, strict cost) at the default compatibility
// version.
func compositionEnv() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
}

// policyExpressions holds the expressions of a policy in the shapes the
// plugin's compilers take.
type policyExpressions struct {
	variables       []plugincel.NamedExpressionAccessor
	matchConditions []plugincel.ExpressionAccessor
	validations     []plugincel.ExpressionAccessor
	messages        []plugincel.ExpressionAccessor // nil where a validation has no messageExpression
	auditAnns       []plugincel.ExpressionAccessor
}

func expressionsOf(p *admissionregistrationv1.ValidatingAdmissionPolicy) policyExpressions {
	var e policyExpressions
	for _, v := range p.Spec.Variables {
		e.variables = append(e.variables, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	for i := range p.Spec.MatchConditions {
		e.matchConditions = append(e.matchConditions, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	for _, v := range p.Spec.Validations {
		e.validations = append(e.validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		var msg plugincel.ExpressionAccessor
		if v.MessageExpression != "" {
			msg = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
		e.messages = append(e.messages, msg)
	}
	for _, a := range p.Spec.AuditAnnotations {
		e.auditAnns = append(e.auditAnns, &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression})
	}
	return e
}

// declarations returns the optional variables of the plugin's validation
// expressions and of its messageExpressions (which cannot use authorizer).
func declarations(p *admissionregistrationv1.ValidatingAdmissionPolicy) (exprs, messages plugincel.OptionalVariableDeclarations) {
	hasParams := p.Spec.ParamKind != nil
	return plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true},
		plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
}

// compilePolicy builds the policy's Validator as the plugin's unexported
// compilePolicy does (validating/plugin.go), in the StoredExpressions mode
// the plugin evaluates stored policies with.
func compilePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	e := expressionsOf(p)
	vars, msgVars := declarations(p)
	compiler, err := plugincel.NewCompositedCompiler(compositionEnv())
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	compiler.CompileAndStoreVariables(e.variables, vars, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if len(e.matchConditions) > 0 {
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(e.matchConditions, vars, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	return validating.NewValidator(
		compiler.CompileCondition(e.validations, vars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(e.auditAnns, vars, environment.StoredExpressions),
		compiler.CompileCondition(e.messages, msgVars, environment.StoredExpressions),
		p.Spec.FailurePolicy,
		nil,
	)
}

// CompileErrors compiles every expression of the policy in the
// NewExpressions mode the API server checks a created policy with, and names
// each that fails. The evaluator cannot tell which expression failed, so
// this is a second compilation with the same compiler.
func CompileErrors(p *admissionregistrationv1.ValidatingAdmissionPolicy) []error {
	e := expressionsOf(p)
	vars, msgVars := declarations(p)
	compiler, err := plugincel.NewCompositedCompiler(compositionEnv())
	if err != nil {
		return []error{fmt.Errorf("ValidatingAdmissionPolicy %q: CEL environment: %w", p.Name, err)}
	}
	var errs []error
	check := func(field string, res plugincel.CompilationResult) {
		if res.Error != nil {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %q: %s %q: %w", p.Name, field, res.ExpressionAccessor.GetExpression(), res.Error))
		}
	}
	for i, v := range e.variables {
		check(fmt.Sprintf("spec.variables[%d].expression", i), compiler.CompileAndStoreVariable(v, vars, environment.NewExpressions))
	}
	for i, m := range e.matchConditions {
		check(fmt.Sprintf("spec.matchConditions[%d].expression", i), compiler.CompileCELExpression(m, vars, environment.NewExpressions))
	}
	for i, v := range e.validations {
		check(fmt.Sprintf("spec.validations[%d].expression", i), compiler.CompileCELExpression(v, vars, environment.NewExpressions))
	}
	for i, m := range e.messages {
		if m != nil {
			check(fmt.Sprintf("spec.validations[%d].messageExpression", i), compiler.CompileCELExpression(m, msgVars, environment.NewExpressions))
		}
	}
	for i, a := range e.auditAnns {
		check(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), compiler.CompileCELExpression(a, vars, environment.NewExpressions))
	}
	return errs
}

// newParamInformer serves the given objects of one kind to
// generic.CollectParams, which lists them through Lister and only asks
// Informer whether it has synced.
func newParamInformer(gvk schema.GroupVersionKind, objs []*unstructured.Unstructured) (informers.GenericInformer, meta.RESTScope) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	scope := meta.RESTScope(meta.RESTScopeNamespace)
	if len(objs) > 0 {
		scope = meta.RESTScopeRoot
	}
	for _, u := range objs {
		if u.GetNamespace() != "" {
			scope = meta.RESTScopeNamespace
		}
		// Keys are unique per namespace and name; a duplicate replaces.
		_ = indexer.Add(u)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return &paramInformer{lister: cache.NewGenericLister(indexer, gvr.GroupResource())}, scope
}

type paramInformer struct{ lister cache.GenericLister }

func (p *paramInformer) Informer() cache.SharedIndexInformer { return syncedInformer{} }
func (p *paramInformer) Lister() cache.GenericLister         { return sortedLister{p.lister} }

// sortedLister lists in namespace and name order. The API server's lister
// lists a cache's map in no set order, so that params selected by a
// binding's selector are evaluated, and their denials listed, in any
// order; in process, one order makes each evaluation repeat itself.
type sortedLister struct{ cache.GenericLister }

func (l sortedLister) List(selector labels.Selector) ([]runtime.Object, error) {
	objs, err := l.GenericLister.List(selector)
	return sortObjects(objs), err
}

func (l sortedLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return sortedNamespaceLister{l.GenericLister.ByNamespace(namespace)}
}

type sortedNamespaceLister struct{ cache.GenericNamespaceLister }

func (l sortedNamespaceLister) List(selector labels.Selector) ([]runtime.Object, error) {
	objs, err := l.GenericNamespaceLister.List(selector)
	return sortObjects(objs), err
}

func sortObjects(objs []runtime.Object) []runtime.Object {
	key := func(o runtime.Object) string {
		m, err := meta.Accessor(o)
		if err != nil {
			return ""
		}
		return m.GetNamespace() + "/" + m.GetName()
	}
	slices.SortFunc(objs, func(a, b runtime.Object) int { return strings.Compare(key(a), key(b)) })
	return objs
}

// syncedInformer is an informer that has always synced. Any other method
// panics (nil embedded interface): CollectParams does not call them.
type syncedInformer struct{ cache.SharedIndexInformer }

func (syncedInformer) HasSynced() bool { return true }

// Matcher is the plugin's matcher of policies and bindings to a request.
// Namespaces are read from those given; one that is not there is read
// through client, which may be nil only when every request's namespace is
// given (a nil client would be called otherwise).
func Matcher(namespaces []*corev1.Namespace, client kubernetes.Interface) (generic.PolicyMatcher, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range namespaces {
		if err := indexer.Add(ns); err != nil {
			return nil, fmt.Errorf("namespace %q: %w", ns.Name, err)
		}
	}
	return generic.NewPolicyMatcher(matching.NewMatcher(corelisters.NewNamespaceLister(indexer), client)), nil
}

// Step is what one policy, or one of its bindings, did with a request.
type Step struct {
	Policy *validating.Policy
	// Binding is nil for an error of the policy itself.
	Binding *validating.PolicyBinding
	// ConfigError is an error configuring the policy or binding: matching,
	// its configuration or paramKind, collecting its params, converting the
	// object. Under failurePolicy Fail it denies whatever the binding's
	// validationActions; under Ignore it does not.
	ConfigError error
	// Results are the validator's results, one per param the binding
	// selected (one, without a paramKind).
	Results []validating.ValidateResult
}

// Walked is every step of a request through the hooks, in evaluation order.
type Walked struct {
	Steps []Step
	// Namespace is the request's namespace, which the dispatcher looks
	// up for every matching binding; NamespaceErr, when it could not, is
	// an error the dispatcher returns as is, and the walk stops there.
	Namespace    string
	NamespaceErr error
	// Unbound are the policies that match the request but none of whose
	// bindings does: the request is theirs, but no binding enforces them
	// on it.
	Unbound []*validating.Policy
}

// Walk evaluates a request against hooks as the plugin's dispatcher does,
// but records every decision of every matching binding instead of stopping
// at the first denial. It decides nothing itself: a Deny decision denies
// only under a binding with the Deny action.
func Walk(ctx context.Context, hooks []validating.PolicyHook, m generic.PolicyMatcher, a admission.Attributes, o admission.ObjectInterfaces, authz authorizer.UnconditionalAuthorizer) Walked {
	w := walker{ctx: ctx, m: m, a: a, o: o, authz: authz}
	for i := range hooks {
		if !w.policy(&hooks[i]) {
			break
		}
	}
	return w.Walked
}

// walker is one request's walk through the hooks: what every step shares,
// and the steps so far.
type walker struct {
	ctx   context.Context
	m     generic.PolicyMatcher
	a     admission.Attributes
	o     admission.ObjectInterfaces
	authz authorizer.UnconditionalAuthorizer
	Walked
}

// policy walks one policy: whether it matches the request, then each of its
// bindings that does. It returns false when the walk stops there (the
// request's namespace could not be read).
func (w *walker) policy(hook *validating.PolicyHook) bool {
	p := hook.Policy
	matches, matchResource, matchKind, err := w.m.DefinitionMatches(w.a, w.o, validating.NewValidatingAdmissionPolicyAccessor(p))
	if err != nil {
		w.Steps = append(w.Steps, Step{Policy: p, ConfigError: err})
		return true
	}
	if !matches {
		return true
	}
	if hook.ConfigurationError != nil {
		w.Steps = append(w.Steps, Step{Policy: p, ConfigError: hook.ConfigurationError})
		return true
	}
	bound := false
	for _, b := range hook.Bindings {
		matches, err := w.m.BindingMatches(w.a, w.o, validating.NewValidatingAdmissionPolicyBindingAccessor(b))
		if err != nil {
			w.Steps = append(w.Steps, Step{Policy: p, Binding: b, ConfigError: err})
			continue
		}
		if !matches {
			continue
		}
		bound = true
		if !w.binding(hook, b, matchResource, matchKind) {
			return false
		}
	}
	if !bound {
		w.Unbound = append(w.Unbound, p)
	}
	return true
}

// binding evaluates the policy of hook under one binding that matches the
// request, once per param the binding selects. It returns false when the
// walk stops there (the request's namespace could not be read).
func (w *walker) binding(hook *validating.PolicyHook, b *validating.PolicyBinding, matchResource schema.GroupVersionResource, matchKind schema.GroupVersionKind) bool {
	p := hook.Policy
	params, err := generic.CollectParams(p.Spec.ParamKind, hook.ParamInformer, hook.ParamScope, b.Spec.ParamRef, w.a.GetNamespace(), nil, nil)
	if err != nil {
		w.Steps = append(w.Steps, Step{Policy: p, Binding: b, ConfigError: err})
		return true
	}
	var va *admission.VersionedAttributes
	if len(params) > 0 {
		va, err = admission.NewVersionedAttributes(w.a, matchKind, w.o)
		if err != nil {
			w.Steps = append(w.Steps, Step{Policy: p, Binding: b, ConfigError: fmt.Errorf("failed to convert object version: %w", err)})
			return true
		}
	}
	// The dispatcher looks the namespace up even when there are no
	// params to validate with, and fails the request if it is missing.
	var namespace *corev1.Namespace
	if nsName := w.a.GetNamespace(); nsName != "" && w.a.GetKind() != NamespaceGVK {
		namespace, err = w.m.GetNamespace(w.ctx, nsName)
		if err != nil {
			w.Namespace, w.NamespaceErr = nsName, err
			return false
		}
	}
	step := Step{Policy: p, Binding: b}
	for _, param := range params {
		step.Results = append(step.Results, hook.Evaluator.Validate(w.ctx, matchResource, va, param, namespace, celconfig.RuntimeCELCostBudget, w.authz))
	}
	w.Steps = append(w.Steps, step)
	return true
}

// NoOpinion is an authorizer with no opinion on anything: a policy's
// `authorizer` checks allow nothing.
type NoOpinion struct{}

// Authorize has no opinion.
func (NoOpinion) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "podsieve evaluates in process: no authorizer", nil
}

// ObjectInterfaces are the conversion interfaces the walk needs for objects
// of any kind given as unstructured: none converts.
func ObjectInterfaces() admission.ObjectInterfaces {
	return admission.NewObjectInterfacesFromScheme(runtime.NewScheme())
}
