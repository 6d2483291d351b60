package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	configcrd "github.com/podsieve/podsieve/config/crd"
	"github.com/podsieve/podsieve/internal/engine"
)

// The parameters of the compiled policies: one PodSecurityParams object per
// namespace (api/v1alpha1), named ParamsName, holding the PolicyExceptions
// in force there (its own, and those of the cluster exceptions namespace
// that reach it). Only exceptions that are Ready, judged by the engine
// against the policies' guardrails, are written; an exception that expires,
// is deleted or stops being permitted is removed by whoever writes the
// parameters.
const (
	ParamsAPIVersion = "policy.podsieve.dev/v1alpha1"
	ParamsKind       = "PodSecurityParams"
	ParamsName       = "podsieve"
)

// ParamException is one PolicyException in force, compiled.
type ParamException = policyv1alpha1.CompiledException

// CompileException compiles a PolicyException in force (Ready), which e is
// the engine's compilation of, for the policies it names.
func CompileException(pe *policyv1alpha1.PolicyException, e *engine.Exception, policy func(string) *engine.Policy) (*ParamException, error) {
	out := &ParamException{Source: e.Source.String()}
	if e.WholeRule {
		out.WholeRule = ptr.To(true)
	}
	for _, name := range e.Policies() {
		p := policy(name)
		if p == nil {
			return nil, fmt.Errorf("PolicyException %s/%s: policy %q is not in force", pe.Namespace, pe.Name, name)
		}
		for _, r := range p.Rules {
			if e.Targets(p.Name, r.Name) {
				out.Targets = append(out.Targets, policyv1alpha1.CompiledTarget{Policy: p.Name, Rule: r.Name})
			}
		}
	}
	if m := pe.Spec.Match; m != nil {
		var err error
		if out.Names, err = paramGlobSet(m.Names); err != nil {
			return nil, fmt.Errorf("PolicyException %s/%s: spec.match.names: %w", pe.Namespace, pe.Name, err)
		}
		out.Kinds = slices.Clone(m.Kinds)
		out.Selector = m.Selector.DeepCopy()
	}
	for i, x := range pe.Spec.PodSecurity {
		entry := policyv1alpha1.CompiledEntry{Control: x.ControlName, Kinds: slices.Clone(x.ContainerKinds)}
		if x.RestrictedField != "" {
			entry.Field = ptr.To(x.RestrictedField)
		}
		for _, l := range []struct {
			globs []string
			into  **policyv1alpha1.GlobSet
			field string
		}{{x.ContainerNames, &entry.Names, "containerNames"}, {x.Images, &entry.Images, "images"}, {x.Values, &entry.Values, "values"}} {
			gs, err := paramGlobSet(l.globs)
			if err != nil {
				return nil, fmt.Errorf("PolicyException %s/%s: spec.podSecurity[%d].%s: %w", pe.Namespace, pe.Name, i, l.field, err)
			}
			*l.into = gs
		}
		out.Entries = append(out.Entries, entry)
	}
	return out, nil
}

// CompileRefused compiles an exception that is not in force (e is the
// engine's compilation of pe) for the refusals of the rules it names: for
// each policy, the reason it does not apply at now, as the engine's decision
// gives it (expired, or the policy's guardrails), so that the API server's
// refusal names it too. It returns nil when no policy it names refuses it
// for such a reason (it names no rule in force, say), which the engine
// would not name either.
func CompileRefused(pe *policyv1alpha1.PolicyException, e *engine.Exception, policy func(string) *engine.Policy, now time.Time) (*ParamException, error) {
	out, err := CompileException(pe, e, func(name string) *engine.Policy {
		if p := policy(name); p != nil {
			return p
		}
		return &engine.Policy{Name: name}
	})
	if err != nil {
		return nil, err
	}
	var kept []policyv1alpha1.CompiledTarget
	for _, t := range out.Targets {
		var reason string
		if e.Expired(now) {
			reason = "expired at " + e.ExpiresAt.UTC().Format(time.RFC3339)
		} else if err := policy(t.Policy).Permits(e, now); err != nil {
			reason = err.Error()
		}
		if reason == "" {
			continue
		}
		t.Refusal = ptr.To(engine.Clip(reason, 1024))
		kept = append(kept, t)
	}
	if len(kept) == 0 {
		return nil, nil
	}
	out.Targets = kept
	return out, nil
}

// paramGlobSet is globs as the parameters hold them; nil for none.
func paramGlobSet(globs []string) (*policyv1alpha1.GlobSet, error) {
	if len(globs) == 0 {
		return nil, nil
	}
	gs, err := compileGlobs(globs)
	if err != nil {
		return nil, err
	}
	out := &policyv1alpha1.GlobSet{Exact: gs.Exact, Patterns: gs.Patterns}
	if gs.Any {
		out.Any = ptr.To(true)
	}
	return out, nil
}

// MaxParamsBytes bounds the JSON of a namespace's exceptions in its
// PodSecurityParams. Well under the 1.5 MiB an object may have in etcd, so
// that the object is always written; and small, because the API server
// compiles the exceptions' patterns again on every evaluation: 256 KiB of
// them cost about a quarter of a second of its CPU per pod write
// (docs/performance.md). Real namespaces hold a few kilobytes: a typical
// exception is about 1 KiB.
const MaxParamsBytes = 256 << 10

// FitParams keeps what fits in MaxParamsBytes: the exceptions in order,
// but first without those that only name refusals (they waive nothing),
// then without the largest exceptions in force. What it drops waives
// nothing in the API server (stricter than the engine, never looser), and
// is returned so the caller can say so.
func FitParams(excs []*ParamException) (kept, dropped []*ParamException) {
	size := func(e *ParamException) int {
		b, err := json.Marshal(e)
		if err != nil {
			return MaxParamsBytes
		}
		return len(b) + 1
	}
	sizes := make(map[*ParamException]int, len(excs))
	total := 0
	for _, e := range excs {
		sizes[e] = size(e)
		total += sizes[e]
	}
	if total <= MaxParamsBytes {
		return excs, nil
	}
	refusalsOnly := func(e *ParamException) bool {
		return !slices.ContainsFunc(e.Targets, func(t policyv1alpha1.CompiledTarget) bool { return t.Refusal == nil })
	}
	order := slices.Clone(excs)
	slices.SortStableFunc(order, func(a, b *ParamException) int {
		if ra, rb := refusalsOnly(a), refusalsOnly(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return sizes[b] - sizes[a]
	})
	drop := map[*ParamException]bool{}
	for _, e := range order {
		if total <= MaxParamsBytes {
			break
		}
		drop[e] = true
		total -= sizes[e]
		dropped = append(dropped, e)
	}
	for _, e := range excs {
		if !drop[e] {
			kept = append(kept, e)
		}
	}
	return kept, dropped
}

// ParamsObject is the PodSecurityParams object of a namespace holding the
// exceptions, sorted by source.
func ParamsObject(namespace string, exceptions []*ParamException) *policyv1alpha1.PodSecurityParams {
	p := &policyv1alpha1.PodSecurityParams{
		TypeMeta:   metav1.TypeMeta{APIVersion: ParamsAPIVersion, Kind: ParamsKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ParamsName, Labels: map[string]string{ManagedByLabel: ManagedBy}},
		Spec:       &policyv1alpha1.PodSecurityParamsSpec{Exceptions: make([]policyv1alpha1.CompiledException, 0, len(exceptions))},
	}
	for _, e := range exceptions {
		p.Spec.Exceptions = append(p.Spec.Exceptions, *e)
	}
	slices.SortFunc(p.Spec.Exceptions, func(a, b policyv1alpha1.CompiledException) int { return strings.Compare(a.Source, b.Source) })
	return p
}

// ParamsCRD is the CustomResourceDefinition of PodSecurityParams, as `make
// manifests` generates it from api/v1alpha1.
func ParamsCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(configcrd.PodSecurityParams, crd); err != nil {
		return nil, fmt.Errorf("the embedded PodSecurityParams CRD: %w", err)
	}
	crd.APIVersion, crd.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	return crd, nil
}

// ParamsGuardName is the ValidatingAdmissionPolicy (and binding) that
// keeps PodSecurityParams podsieve's own.
const ParamsGuardName = "podsieve.podsecurityparams"

// ParamsGuard is a ValidatingAdmissionPolicy, and its binding, that refuses
// a PodSecurityParams written by anyone but writer (the manager's own
// user): what they hold is what the API server waives, so a forged or
// edited one would waive anything for whoever may write it, whatever RBAC
// a custom role grants by mistake. Deletions pass (the namespace's deletion
// takes its objects with it); the leader writes a deleted one again, and
// without it an Enforce policy refuses (fail closed).
func ParamsGuard(writer string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	labels := map[string]string{ManagedByLabel: ManagedBy}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: ParamsGuardName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{policyv1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"podsecurityparams"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "request.userInfo.username == " + quote(writer),
				Message: fmt.Sprintf("PodSecurityParams are written by podsieve only (%s): they are what the API server's form of the SecurityPolicies waives; "+
					"write a PolicyException instead", writer),
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ParamsGuardName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ParamsGuardName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return vap, binding
}

// NamespaceParams is what a namespace's PodSecurityParams object holds,
// compiled from the exceptions that reach it: those in force, which waive,
// and those held but not in force, which only name their refusal (as the
// webhook's refusal does). get reads an exception's object; one it cannot
// read, or whose generation or UID is not the one the index judged, is left
// out (it waives nothing in the API server meanwhile) and makes pending true:
// the caller tries again once the index has judged what the cache holds.
// What does not fit MaxParamsBytes is left out too, and returned as dropped;
// an exception that does not compile is returned in errs. Left out, an
// exception waives nothing: the API server refuses more than the engine,
// never less.
type NamespaceParams struct {
	Object  *policyv1alpha1.PodSecurityParams
	Pending bool
	Dropped []*ParamException
	Errs    []error
}

// CompileNamespaceParams builds a namespace's NamespaceParams. The manager's
// leader writes its Object; the background scan evaluates with it.
func CompileNamespaceParams(namespace string, inForce, inactive []*engine.Exception, policy func(string) *engine.Policy,
	get func(namespace, name string) (*policyv1alpha1.PolicyException, error), now time.Time) NamespaceParams {
	var (
		out  NamespaceParams
		list []*ParamException
	)
	for i, e := range append(slices.Clip(inForce), inactive...) {
		pe, err := get(e.Namespace, e.Name)
		if err != nil || pe.Generation != e.Generation || string(pe.UID) != e.UID {
			out.Pending = true
			continue
		}
		var px *ParamException
		if i < len(inForce) {
			px, err = CompileException(pe, e, policy)
		} else {
			px, err = CompileRefused(pe, e, policy, now)
		}
		if err != nil {
			out.Errs = append(out.Errs, fmt.Errorf("PolicyException %s: %w", e.Source.String(), err))
			continue
		}
		if px != nil {
			list = append(list, px)
		}
	}
	list, out.Dropped = FitParams(list)
	out.Object = ParamsObject(namespace, list)
	return out
}
