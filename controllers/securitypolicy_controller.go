package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/kube"
	"github.com/podsieve/podsieve/internal/words"
)

// SecurityPolicyReconciler compiles SecurityPolicies into the index and
// reports whether each is enforced.
//
// A policy whose spec stops compiling keeps its last valid compiled form in
// force (fail closed) and says so with the Degraded reason. The leader keeps
// the last spec that compiled in status.lastValidSpec, and a replica that
// starts while the spec does not compile puts that one in force, so that a
// restart does not unenforce a Degraded policy. A policy with no valid form
// to fall back on (stored by an earlier podsieve that accepted what this one
// refuses, which kept no lastValidSpec) is read at its strictest
// (engine.CompileStoredPolicy) and is Degraded too: an upgrade never turns a
// policy off. Only one that cannot be read even so is not enforced
// (InvalidSpec). Each replica exports the state of each policy as it
// enforces it (podsieve_securitypolicy_state), which the alerts read.
type SecurityPolicyReconciler struct {
	client.Client
	Index    *index.Index
	Recorder events.EventRecorder

	leader *leadership
	sync   *syncTracker
}

// +kubebuilder:rbac:groups=policy.podsieve.dev,resources=securitypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.podsieve.dev,resources=securitypolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile compiles one SecurityPolicy into the index (or keeps its last
// valid form in force) and, on the leader, writes its part of the status.
func (r *SecurityPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sp policyv1alpha1.SecurityPolicy
	if err := r.Get(ctx, req.NamespacedName, &sp); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// The exception controller hears of it from the index
		// (PolicyExceptionReconciler.policyChanges).
		r.Index.DeletePolicy(req.Name)
		setPolicyState(req.Name, "")
		r.sync.done(policyKey(req.Name))
		return ctrl.Result{}, nil
	}
	if sp.Name == "" {
		sp.Name = req.Name
	}

	inForce := r.Index.Snapshot().Policy(sp.Name)
	var compileErr error
	if !compiledFrom(inForce, &sp) {
		p, err := engine.CompileStoredPolicy(&sp)
		if err == nil && len(p.Strict) > 0 {
			err = errors.New(p.Strict[0].Problem)
		}
		if err != nil {
			if sameObject(inForce, &sp) && len(inForce.Strict) == 0 {
				// An earlier generation compiled here stays in force.
				// One read at its strictest does not: it was never a
				// valid form, and a replica that starts now reads the
				// current spec, as this one does below.
				p = nil
			} else if last := lastValid(ctx, &sp); last != nil {
				// Nothing of this object in force here (this replica
				// started after the spec broke): the last spec that
				// compiled, as the status keeps it, stays in force as it
				// does on the replicas that compiled it.
				p = last
			}
			// Otherwise p is this spec read at its strictest, or nil when
			// it cannot be read at all.
		}
		if p != nil {
			// The exception controller hears of it from the index
			// (PolicyExceptionReconciler.policyChanges).
			r.Index.SetPolicy(p)
			inForce = p
		}
		compileErr = err
	}
	_, reason := policyState(inForce, &sp)
	setPolicyState(sp.Name, reason)
	r.sync.done(policyKey(sp.Name))
	if !r.leader.isLeader() {
		return ctrl.Result{}, nil
	}
	return requeueOnConflict(ctrl.Result{}, r.writeStatus(ctx, &sp, inForce, compileErr))
}

// writeStatus derives the status from the facts and patches it when it
// changed. inForce is the compiled policy in the index, if any.
func (r *SecurityPolicyReconciler) writeStatus(ctx context.Context, sp *policyv1alpha1.SecurityPolicy, inForce *engine.Policy, compileErr error) error {
	status := sp.Status.DeepCopy()
	status.ObservedGeneration = sp.Generation
	ready, reason := policyState(inForce, sp)
	var message, eventType string
	switch {
	case reason == policyv1alpha1.ReasonCompiled:
		eventType = corev1.EventTypeNormal
		message = fmt.Sprintf("%s compiled; enforced with action %s", words.Count(len(inForce.Rules), "rule"), inForce.Action)
		status.Rules = int32(len(inForce.Rules))
		if status.LastValidSpec == nil || status.LastValidSpec.Generation != sp.Generation {
			// Compared by generation, not by bytes: the API server's JSON
			// of the copy need not be ours.
			raw, err := json.Marshal(sp.Spec)
			if err != nil {
				return fmt.Errorf("keep the spec of generation %d: %w", sp.Generation, err)
			}
			status.LastValidSpec = &policyv1alpha1.LastValidSpec{Generation: sp.Generation, Spec: runtime.RawExtension{Raw: raw}}
		}
	case reason == policyv1alpha1.ReasonDegraded && compiledFrom(inForce, sp):
		// Read at its strictest; lastValidSpec stays what it was: this
		// spec did not compile.
		eventType = corev1.EventTypeWarning
		message = strictMessage(sp.Generation, inForce)
		status.Rules = int32(len(inForce.Rules))
	case reason == policyv1alpha1.ReasonDegraded:
		eventType = corev1.EventTypeWarning
		message = fmt.Sprintf("generation %d does not compile: %v; generation %d (%s) stays in force until the spec is fixed",
			sp.Generation, compileErr, inForce.Generation, words.Count(len(inForce.Rules), "rule"))
		status.Rules = int32(len(inForce.Rules))
	default:
		eventType = corev1.EventTypeWarning
		message = fmt.Sprintf("the policy does not compile and is not enforced: %v", compileErr)
		status.Rules = 0
	}
	active, err := r.activeExceptions(ctx, sp.Name)
	if err != nil {
		return err
	}
	status.ActiveExceptions = active
	news := setReady(&status.Conditions, sp.Generation, ready, reason, message)
	// InvalidSpec and Degraded both wait for the spec to be fixed.
	setStalled(&status.Conditions, sp.Generation, !ready, reason, message)
	patched, err := kube.SecurityPolicyStatus.Apply(ctx, r.Client, sp, status)
	if err != nil || !patched {
		return err
	}
	if news {
		eventReason := policyv1alpha1.EventReasonCompiled
		if !ready {
			eventReason = policyv1alpha1.EventReasonRefused
		}
		// An event's note holds at most 1024 bytes (events.k8s.io/v1);
		// the API server refuses a longer one, and the event would be lost.
		r.Recorder.Eventf(sp, nil, eventType, eventReason, "Compile", "%s", truncate(message, 1024))
	}
	return nil
}

// policyState is what the Ready condition says of a policy given what is in
// force for it: Compiled when its current spec is enforced as written,
// Degraded when another form of it is (an earlier generation, or this one
// read at its strictest), InvalidSpec when none is. Ready is true only for
// Compiled: a Degraded policy is enforced, but not as written.
func policyState(inForce *engine.Policy, sp *policyv1alpha1.SecurityPolicy) (ready bool, reason string) {
	switch {
	case compiledFrom(inForce, sp) && len(inForce.Strict) == 0:
		return true, policyv1alpha1.ReasonCompiled
	case inForce != nil:
		return false, policyv1alpha1.ReasonDegraded
	}
	return false, policyv1alpha1.ReasonInvalidSpec
}

// maxStrictListed bounds the parts a Degraded message lists; the first
// ones say what the rest are like.
const maxStrictListed = 8

// strictMessage says that the spec is enforced at its strictest, and for
// each part that does not compile what to write instead and what is
// enforced until then.
func strictMessage(generation int64, p *engine.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d does not compile as this version of podsieve reads it (an earlier version accepted it, or it was written "+
		"while the validating webhook was bypassed); it is enforced at its strictest (%s, action %s) until the spec is fixed: ",
		generation, words.Count(len(p.Rules), "rule"), p.Action)
	for i, s := range p.Strict {
		if i == maxStrictListed {
			fmt.Fprintf(&b, "; and %d more parts", len(p.Strict)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// activeExceptions counts the Ready exceptions that target the policy.
func (r *SecurityPolicyReconciler) activeExceptions(ctx context.Context, policy string) (int32, error) {
	var list policyv1alpha1.PolicyExceptionList
	if err := r.List(ctx, &list, client.MatchingFields{IndexExceptionPolicy: policy}); err != nil {
		return 0, fmt.Errorf("list the exceptions of policy %q: %w", policy, err)
	}
	var n int32
	for i := range list.Items {
		if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, policyv1alpha1.ConditionReady) {
			n++
		}
	}
	return n, nil
}

func (r *SecurityPolicyReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&policyv1alpha1.SecurityPolicy{}).
		// activeExceptions follows the exceptions' Ready conditions.
		Watches(&policyv1alpha1.PolicyException{}, handler.EnqueueRequestsFromMapFunc(policiesOfException)).
		WatchesRawSource(onElection(mgr, requestsFor(mgr.GetClient(), &policyv1alpha1.SecurityPolicyList{}))).
		Named("securitypolicy").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

func policiesOfException(_ context.Context, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, name := range exceptionPolicies(obj) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	}
	return out
}

// sameObject reports whether p was compiled from this object, at any
// generation.
func sameObject(p *engine.Policy, sp *policyv1alpha1.SecurityPolicy) bool {
	return p != nil && p.UID == string(sp.UID)
}

// lastValid compiles the spec that status.lastValidSpec keeps, as the
// policy at that generation, or returns nil when there is none or it does
// not compile (written by an older podsieve, say).
func lastValid(ctx context.Context, sp *policyv1alpha1.SecurityPolicy) *engine.Policy {
	last := sp.Status.LastValidSpec
	if last == nil || last.Generation >= sp.Generation || len(last.Spec.Raw) == 0 {
		return nil
	}
	old := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: sp.Name, UID: sp.UID, Generation: last.Generation}}
	if err := json.Unmarshal(last.Spec.Raw, &old.Spec); err != nil {
		log.FromContext(ctx).Error(err, "status.lastValidSpec is not a spec; ignored", "generation", last.Generation)
		return nil
	}
	p, err := engine.CompilePolicy(old)
	if err != nil {
		log.FromContext(ctx).Error(err, "status.lastValidSpec does not compile; ignored", "generation", last.Generation)
		return nil
	}
	return p
}

// compiledFrom reports whether p was compiled from this object's current
// spec. The UID matters: a policy deleted and created again (kubectl replace
// --force) starts over at generation 1.
func compiledFrom(p *engine.Policy, sp *policyv1alpha1.SecurityPolicy) bool {
	return p != nil && p.UID == string(sp.UID) && p.Generation == sp.Generation
}
