package background

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/admissionpolicy"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/vap"
)

// The cross-check. With --admission-policies on, the API server enforces
// each SecurityPolicy in force through the ValidatingAdmissionPolicy
// podsieve compiles from it (internal/admissionpolicy), and the webhook
// through the engine: two implementations of one semantics. Differential
// tests and fuzzing hold them equal on generated objects; the scan also
// holds them equal on the cluster's own objects. It decides each object
// version it decides (memo.go) a second time, as a create at admission,
// with the engine and with the compiled policies, evaluated in process by
// the API server's own libraries (internal/vap), and compares, rule by
// rule, which rules fail. A difference is a bug in one of them: it is
// logged, naming the object, policy and rules, and counted in
// podsieve_background_crosscheck_total{result="disagree"}, which the alert
// PodsieveEngineAndAPIServerDisagree watches.
//
// Both sides get the same input: the cached object as the API server
// stored it, the index's view of the namespace's labels and exceptions
// (compiled into parameters as the leader compiles them), and the same
// requesting user, crossCheckUser. What the compiled form deliberately
// decides otherwise is not compared (result not_compared): an object over
// its size bounds, an evaluation error (its cost budget), parameters that
// are pending or over their size limit, a policy it cannot compile, and an
// engine decision stopped by its work budget.

// crossCheckUser is the requesting user both sides are given: a name no
// real request carries.
const crossCheckUser = "podsieve:background-scan"

// Cross-check results.
const (
	crossAgree       = "agree"
	crossDisagree    = "disagree"
	crossNotCompared = "not_compared"
)

// compiledPolicy is a SecurityPolicy's compiled form, kept between scans
// while the policy's generation does not change: compiling one costs
// hundreds of milliseconds.
type compiledPolicy struct {
	name       string // the SecurityPolicy's
	uid        string
	generation int64
	// hook is nil when the policy has no compiled form (unsupported, or
	// not enforced as written): it is not compared.
	hook  *validating.PolicyHook
	rules []string // rule names, by validation
}

// namespaceCheck is the compiled form of the policies in force, ready to
// decide a namespace's objects.
type namespaceCheck struct {
	// hooks are the policies compared, policies all of them (by
	// ValidatingAdmissionPolicy name).
	hooks    []validating.PolicyHook
	policies map[string]*compiledPolicy
	matcher  generic.PolicyMatcher
	// skipped are the policies that read the namespace's parameters when
	// those cannot be compared (skipWhy): they are not_compared.
	skipped []*compiledPolicy
	skipWhy string
	// spent is the time the namespace's cross-check took so far; past
	// Options.CrossCheckBudget, objects are not compared.
	spent time.Duration
}

// namespaceCheck prepares the cross-check of a namespace, or returns nil
// when it is off.
func (s *Scanner) namespaceCheck(ctx context.Context, snap *index.Snapshot, namespace string, labels map[string]string, now time.Time) (*namespaceCheck, error) {
	if !s.opts.CrossCheck {
		return nil, nil
	}
	nc := &namespaceCheck{policies: map[string]*compiledPolicy{}}
	for name := range s.compiledPolicies {
		if snap.Policy(name) == nil {
			// Gone: so are its counters.
			delete(s.compiledPolicies, name)
			crossChecks.DeletePartialMatch(prometheus.Labels{"policy": name})
		}
	}
	params := false
	for _, p := range snap.Policies() {
		cp, err := s.compiled(ctx, p)
		if err != nil {
			return nil, err
		}
		if cp.hook == nil {
			continue
		}
		nc.policies[cp.hook.Policy.Name] = cp
		params = params || cp.hook.Policy.Spec.ParamKind != nil
	}
	var paramObjs []*unstructured.Unstructured
	if params {
		get := func(namespace, name string) (*policyv1alpha1.PolicyException, error) {
			var pe policyv1alpha1.PolicyException
			return &pe, s.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pe)
		}
		np := admissionpolicy.CompileNamespaceParams(namespace, snap.InForce(namespace, labels), snap.Inactive(namespace, labels), snap.Policy, get, now)
		switch {
		case np.Pending:
			nc.skipWhy = "an exception the index judged is not in the cache yet"
		case len(np.Errs) > 0:
			nc.skipWhy = fmt.Sprintf("an exception has no compiled form: %v", errors.Join(np.Errs...))
		case len(np.Dropped) > 0:
			nc.skipWhy = fmt.Sprintf("the exceptions exceed the %d bytes a PodSecurityParams holds", admissionpolicy.MaxParamsBytes)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(np.Object)
		if err != nil {
			return nil, fmt.Errorf("cross-check: namespace %s's parameters: %w", namespace, err)
		}
		paramObjs = []*unstructured.Unstructured{{Object: m}}
	}
	for _, name := range slices.Sorted(maps.Keys(nc.policies)) {
		cp := nc.policies[name]
		if nc.skipWhy != "" && cp.hook.Policy.Spec.ParamKind != nil {
			nc.skipped = append(nc.skipped, cp)
			continue
		}
		nc.hooks = append(nc.hooks, vap.WithParams(*cp.hook, paramObjs))
	}
	var err error
	// The namespace is always given, so the matcher never asks a client.
	nc.matcher, err = vap.Matcher([]*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}}, nil)
	if err != nil {
		return nil, err
	}
	return nc, nil
}

// compiled returns a policy's compiled form, compiling it when its
// generation changed.
func (s *Scanner) compiled(ctx context.Context, p *engine.Policy) (*compiledPolicy, error) {
	if cp := s.compiledPolicies[p.Name]; cp != nil && cp.uid == p.UID && cp.generation == p.Generation {
		return cp, nil
	}
	cp := &compiledPolicy{name: p.Name, uid: p.UID, generation: p.Generation}
	var sp policyv1alpha1.SecurityPolicy
	if err := s.client.Get(ctx, client.ObjectKey{Name: p.Name}, &sp); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("cross-check: get SecurityPolicy %s: %w", p.Name, err)
		}
		return cp, nil // deleted: the index hears of it next
	}
	if string(sp.UID) != p.UID || sp.Generation != p.Generation || len(p.Strict) > 0 {
		// The cache and the index disagree on what the policy says, or
		// the index enforces it at its strictest (Degraded), which the
		// leader does not compile either. Not kept: the next scan tries
		// again.
		return cp, nil
	}
	// No namespace is left out here: the comparison is of the two forms'
	// semantics, wherever the scan decides.
	c, err := admissionpolicy.CompilePolicy(&sp, p, admissionpolicy.Options{})
	if err != nil {
		var unsupported *admissionpolicy.Unsupported
		if !errors.As(err, &unsupported) {
			log.FromContext(ctx).Error(err, "cross-check: compile SecurityPolicy", "policy", p.Name)
		}
	} else {
		hook := vap.Hook(c.Policy, c.Bindings)
		cp.hook = &hook
		for _, r := range p.Rules {
			cp.rules = append(cp.rules, r.Name)
		}
		// Each result's series starts at 0, so that the alert's
		// increase() sees the first disagreement.
		for _, r := range []string{crossAgree, crossDisagree, crossNotCompared} {
			crossChecks.WithLabelValues(p.Name, r).Add(0)
		}
	}
	s.compiledPolicies[p.Name] = cp
	return cp, nil
}

// crossCheck decides an object, given as the API server stores it, as a
// create with the compiled policies, and compares each policy's failing
// rules with the engine's admission decision of the same object. It counts
// and logs the result per policy.
func (s *Scanner) crossCheck(ctx context.Context, nc *namespaceCheck, u *unstructured.Unstructured, gvk schema.GroupVersionKind, o *engine.Object, snap *index.Snapshot, labels map[string]string, now time.Time) {
	if nc == nil || len(nc.policies) == 0 {
		return
	}
	notCompared := func(cps []*compiledPolicy, why string) {
		for _, cp := range cps {
			crossChecks.WithLabelValues(cp.name, crossNotCompared).Inc()
		}
		log.FromContext(ctx).V(1).Info("cross-check: not compared", "kind", gvk.Kind, "namespace", o.Namespace, "name", o.Name, "reason", why)
	}
	notCompared(nc.skipped, nc.skipWhy)
	compared := make([]*compiledPolicy, 0, len(nc.hooks))
	for _, h := range nc.hooks {
		compared = append(compared, nc.policies[h.Policy.Name])
	}
	switch {
	case len(compared) == 0:
		return
	case nc.spent >= s.opts.CrossCheckBudget:
		notCompared(compared, fmt.Sprintf("the namespace's scan spent its cross-check budget of %s", s.opts.CrossCheckBudget))
		return
	}
	if why := admissionpolicy.TooLarge(o.Spec, o.Meta.GetAnnotations()); why != "" {
		// The compiled form refuses it by design, before any check.
		notCompared(compared, why+admissionpolicy.TooLargeMessage)
		return
	}
	start := time.Now()
	defer func() { nc.spent += time.Since(start) }()
	oa := *o
	oa.RequestUser = crossCheckUser
	d := snap.DecideIn(&oa, labels, now, engine.Admission)
	engineFailing := map[string][]string{}
	for _, r := range d.Results {
		if r.Outcome == engine.Fail {
			engineFailing[r.Rule.Policy.Name] = append(engineFailing[r.Rule.Policy.Name], r.Rule.Name)
		}
	}

	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	attrs := admission.NewAttributesRecord(u, nil, gvk, o.Namespace, o.Name, gvr, "", admission.Create, nil, false, &user.DefaultInfo{Name: crossCheckUser})
	w := vap.Walk(ctx, nc.hooks, nc.matcher, attrs, vap.ObjectInterfaces(), vap.NoOpinion{})
	logger := log.FromContext(ctx).WithValues("kind", gvk.Kind, "namespace", o.Namespace, "name", o.Name)
	judged := map[string]bool{}
	for _, st := range w.Steps {
		cp := nc.policies[st.Policy.Name]
		policy := cp.name
		judged[policy] = true
		celFailing, why := cp.failing(st)
		if why == "" && d.Err != nil {
			why = "the engine stopped: " + d.Err.Error()
		}
		if why != "" {
			logger.V(1).Info("cross-check: not compared", "policy", policy, "reason", why)
			crossChecks.WithLabelValues(policy, crossNotCompared).Inc()
			continue
		}
		s.compare(logger, policy, engineFailing[policy], celFailing)
	}
	if w.NamespaceErr != nil {
		logger.Error(w.NamespaceErr, "cross-check: the compiled policies could not read the namespace")
		return
	}
	// A policy the engine applies and whose compiled form matched no
	// binding (the opt-out labels) or did not match the object at all.
	unbound := map[string]bool{}
	for _, p := range w.Unbound {
		unbound[p.Name] = true
	}
	for _, cp := range compared {
		policy := cp.name
		if judged[policy] || unbound[cp.hook.Policy.Name] {
			continue
		}
		if d.Err != nil {
			crossChecks.WithLabelValues(policy, crossNotCompared).Inc()
			continue
		}
		s.compare(logger, policy, engineFailing[policy], nil)
	}
}

// failing returns the rules a binding's validations failed, or why they
// cannot be compared.
func (cp *compiledPolicy) failing(st vap.Step) ([]string, string) {
	if st.ConfigError != nil {
		return nil, "configuration: " + st.ConfigError.Error()
	}
	if len(st.Results) != 1 || len(st.Results[0].Decisions) != len(cp.rules) {
		return nil, fmt.Sprintf("%d results with %d decisions for %d rules (an evaluation error)", len(st.Results), decisions(st.Results), len(cp.rules))
	}
	var out []string
	for i, dec := range st.Results[0].Decisions {
		switch {
		case dec.Evaluation == validating.EvalError:
			return nil, "evaluation error: " + dec.Message
		case dec.Evaluation == validating.EvalDeny:
			out = append(out, cp.rules[i])
		}
	}
	return out, ""
}

func decisions(rs []validating.ValidateResult) int {
	n := 0
	for _, r := range rs {
		n += len(r.Decisions)
	}
	return n
}

// compare counts and logs one policy's comparison.
func (s *Scanner) compare(logger logr.Logger, policy string, engineFailing, celFailing []string) {
	slices.Sort(engineFailing)
	slices.Sort(celFailing)
	if slices.Equal(engineFailing, celFailing) {
		crossChecks.WithLabelValues(policy, crossAgree).Inc()
		return
	}
	crossChecks.WithLabelValues(policy, crossDisagree).Inc()
	if !s.disagreementLogs.Allow() {
		return
	}
	logger.Error(nil, "cross-check: the engine and the API server's form of the policy decide this object differently; this is a bug in one of them, please report it with the object and the policy",
		"policy", policy, "engineFailingRules", engineFailing, "apiServerFailingRules", celFailing)
}
