package controllers

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// PolicyExceptionReconciler judges each PolicyException against the
// policies in force and keeps only the Ready ones in the index.
//
// Expiry does not wait for a reconcile: the index checks the clock on every
// lookup. The reconciler requeues itself for expiresAt to turn the condition
// to Expired, take the exception out of the index and emit an event.
type PolicyExceptionReconciler struct {
	client.Client
	Index               *index.Index
	Recorder            events.EventRecorder
	Clock               clock.PassiveClock
	ExceptionsNamespace string

	leader *leadership
	sync   *syncTracker
}

// +kubebuilder:rbac:groups=policy.podsieve.dev,resources=policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.podsieve.dev,resources=policyexceptions/status,verbs=get;update;patch

func (r *PolicyExceptionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pe policyv1alpha1.PolicyException
	if err := r.Get(ctx, req.NamespacedName, &pe); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.Index.DeleteException(req.Namespace, req.Name)
		r.sync.done(exceptionKey(req.Namespace, req.Name))
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	snap := r.Index.Snapshot()

	e, err := engine.CompileException(&pe, r.ExceptionsNamespace)
	var st engine.ExceptionState
	if err != nil {
		st = engine.ExceptionState{Reason: policyv1alpha1.ReasonInvalid, Message: err.Error()}
	} else {
		st = e.State(snap.Policy, now)
		if st.Reason == policyv1alpha1.ReasonPolicyNotFound && r.waitForPolicies(e) {
			// At start, a policy may not have been compiled yet: judging now
			// would flap the condition to PolicyNotFound and back.
			return ctrl.Result{RequeueAfter: requeueSoon}, nil
		}
	}
	switch {
	case st.Ready:
		r.Index.SetException(e)
	case e != nil:
		// Not in force, but named in the refusals it would have prevented.
		r.Index.SetInactiveException(e)
	default:
		r.Index.DeleteException(pe.Namespace, pe.Name)
	}
	r.sync.done(exceptionKey(pe.Namespace, pe.Name))

	var result ctrl.Result
	if e != nil && e.ExpiresAt != nil && now.Before(*e.ExpiresAt) {
		// Wake at expiry to turn the condition to Expired, whatever it says
		// now; the index already stops applying the exception then.
		result.RequeueAfter = e.ExpiresAt.Sub(now) + time.Millisecond
	}
	if !r.leader.isLeader() {
		return result, nil
	}
	return result, r.writeStatus(ctx, &pe, st)
}

// waitForPolicies reports whether a policy the exception names exists but
// has not been reconciled yet.
func (r *PolicyExceptionReconciler) waitForPolicies(e *engine.Exception) bool {
	for _, name := range e.Policies() {
		if r.Index.Snapshot().Policy(name) == nil && !r.sync.isProcessed(policyKey(name)) {
			return true
		}
	}
	return false
}

func (r *PolicyExceptionReconciler) writeStatus(ctx context.Context, pe *policyv1alpha1.PolicyException, st engine.ExceptionState) error {
	status := pe.Status.DeepCopy()
	status.ObservedGeneration = pe.Generation
	status.Policies, status.Controls = summaries(pe)
	news := setReady(&status.Conditions, pe.Generation, st.Ready, st.Reason, st.Message)
	patched, err := patchStatus(ctx, r.Client, pe, func() { pe.Status = *status })
	if err != nil || !patched {
		return err
	}
	log.FromContext(ctx).V(1).Info("exception judged", "reason", st.Reason)
	if news {
		eventType, eventReason := corev1.EventTypeWarning, policyv1alpha1.EventReasonRefused
		switch st.Reason {
		case policyv1alpha1.ReasonActive:
			eventType, eventReason = corev1.EventTypeNormal, policyv1alpha1.EventReasonActivated
		case policyv1alpha1.ReasonExpired:
			eventType, eventReason = corev1.EventTypeNormal, policyv1alpha1.EventReasonExpired
		}
		r.Recorder.Eventf(pe, nil, eventType, eventReason, "Judge", "%s", st.Message)
	}
	return nil
}

// summaries are the POLICY and CONTROLS columns: kubectl shows only the
// first element of a list column, so they are joined strings.
func summaries(pe *policyv1alpha1.PolicyException) (policies, controls string) {
	var names []string
	for _, t := range pe.Spec.Exceptions {
		names = append(names, t.PolicyName)
	}
	if len(pe.Spec.PodSecurity) == 0 {
		return truncate(strings.Join(dedupe(names), ","), 4096), "*"
	}
	var cs []string
	for _, ps := range pe.Spec.PodSecurity {
		cs = append(cs, string(ps.ControlName))
	}
	return truncate(strings.Join(dedupe(names), ","), 4096), truncate(strings.Join(dedupe(cs), ","), 1024)
}

func dedupe(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (r *PolicyExceptionReconciler) setup(mgr ctrl.Manager, events <-chan event.GenericEvent) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&policyv1alpha1.PolicyException{}).
		// The policy controller says when a policy's compiled form changed
		// or it was deleted, once the index has the change (a watch on the
		// policy would judge against the index before it). A leader change
		// resends every exception.
		WatchesRawSource(source.Channel(events, handler.EnqueueRequestsFromMapFunc(r.exceptionsOf))).
		Named("policyexception").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// exceptionsOf maps a PolicyException to itself and a SecurityPolicy to
// the exceptions that name it.
func (r *PolicyExceptionReconciler) exceptionsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	if _, ok := obj.(*policyv1alpha1.PolicyException); ok {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
	}
	return r.exceptionsOfPolicy(ctx, obj)
}

func (r *PolicyExceptionReconciler) exceptionsOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	var list policyv1alpha1.PolicyExceptionList
	if err := r.List(ctx, &list, client.MatchingFields{IndexExceptionPolicy: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list the exceptions of a policy", "policy", obj.GetName())
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}
