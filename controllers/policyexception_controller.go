package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/kube"
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
	// MaxPerNamespace is how many PolicyExceptions of one namespace are
	// judged and held in the index; the newest beyond it are not (see
	// withinLimit). 0 sets no limit.
	MaxPerNamespace int

	leader *leadership
	sync   *syncTracker
}

// +kubebuilder:rbac:groups=policy.podsieve.dev,resources=policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.podsieve.dev,resources=policyexceptions/status,verbs=get;update;patch

// Reconcile compiles one PolicyException into the index, judges whether it
// is in force, and, on the leader, writes its part of the status.
func (r *PolicyExceptionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pe policyv1alpha1.PolicyException
	if err := r.Get(ctx, req.NamespacedName, &pe); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.Index.DeleteException(req.Namespace, req.Name)
		setExceptionExpiry(req.Namespace, req.Name, false, nil)
		r.sync.done(exceptionKey(req.Namespace, req.Name))
		return ctrl.Result{}, nil
	}
	if pe.DeletionTimestamp != nil {
		// Deleted, and held only by finalizers, which whoever may edit the
		// exception may add: it waives nothing from the deletion on.
		r.Index.DeleteException(pe.Namespace, pe.Name)
		setExceptionExpiry(pe.Namespace, pe.Name, false, nil)
		r.sync.done(exceptionKey(pe.Namespace, pe.Name))
		if !r.leader.isLeader() {
			return ctrl.Result{}, nil
		}
		return requeueOnConflict(ctrl.Result{}, r.writeStatus(ctx, &pe, engine.ExceptionState{Reason: policyv1alpha1.ReasonDeleting,
			Message: fmt.Sprintf("PolicyException %s/%s is being deleted (deletionTimestamp %s) and is not honoured",
				pe.Namespace, pe.Name, pe.DeletionTimestamp.UTC().Format(time.RFC3339))}))
	}
	now := r.Clock.Now()
	snap := r.Index.Snapshot()

	if st, ok, err := r.withinLimit(ctx, &pe); err != nil {
		return ctrl.Result{}, err
	} else if !ok {
		// Not compiled, not in the index: the limit bounds what every
		// replica holds whatever the API server was made to hold.
		r.Index.DeleteException(pe.Namespace, pe.Name)
		setExceptionExpiry(pe.Namespace, pe.Name, false, nil)
		r.sync.done(exceptionKey(pe.Namespace, pe.Name))
		if !r.leader.isLeader() {
			return ctrl.Result{}, nil
		}
		return requeueOnConflict(ctrl.Result{}, r.writeStatus(ctx, &pe, st))
	}

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
	r.Index.Place(pe.Namespace, pe.Name, e, st)
	var expiresAt *time.Time
	if e != nil {
		expiresAt = e.ExpiresAt
	}
	setExceptionExpiry(pe.Namespace, pe.Name, st.Ready, expiresAt)
	r.sync.done(exceptionKey(pe.Namespace, pe.Name))

	var result ctrl.Result
	if e != nil && e.ExpiresAt != nil && now.Before(*e.ExpiresAt) {
		// Wake at expiry to turn the condition to Expired, whatever it says
		// now; the index already stops applying the exception then.
		result.RequeueAfter = e.ExpiresAt.Sub(now) + time.Millisecond
	}
	if _, recheck := exceptionStalled(st.Ready, st.Reason, pe.CreationTimestamp.Time, now); recheck > 0 &&
		(result.RequeueAfter == 0 || recheck < result.RequeueAfter) {
		// Wake when a missing policy or rule stops being a moment's wait.
		result.RequeueAfter = recheck
	}
	if !r.leader.isLeader() {
		return result, nil
	}
	return requeueOnConflict(result, r.writeStatus(ctx, &pe, st))
}

// withinLimit reports whether the exception is among the MaxPerNamespace
// oldest of its namespace, and the state to report when it is not. The
// webhook refuses creations beyond the limit; this holds when it could not
// (down, or two creations at once).
func (r *PolicyExceptionReconciler) withinLimit(ctx context.Context, pe *policyv1alpha1.PolicyException) (engine.ExceptionState, bool, error) {
	if r.MaxPerNamespace <= 0 {
		return engine.ExceptionState{}, true, nil
	}
	var all policyv1alpha1.PolicyExceptionList
	if err := r.List(ctx, &all, client.InNamespace(pe.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return engine.ExceptionState{}, false, fmt.Errorf("list the PolicyExceptions of namespace %q: %w", pe.Namespace, err)
	}
	list := all.Items
	if len(list) <= r.MaxPerNamespace {
		return engine.ExceptionState{}, true, nil
	}
	// Its rank is how many are older (compareAge): counted, not sorted,
	// since every exception beyond the limit is judged again on each change
	// of its namespace.
	older := 0
	for i := range list {
		if olderThan(&list[i], pe) {
			older++
		}
	}
	if older < r.MaxPerNamespace {
		return engine.ExceptionState{}, true, nil
	}
	return engine.ExceptionState{Reason: policyv1alpha1.ReasonLimitExceeded, Message: fmt.Sprintf(
		"namespace %q holds %d PolicyExceptions, more than the limit of %d (podsieve manager --max-exceptions-per-namespace); "+
			"this one is among the %d newest and is not in force: delete the ones no longer used (kubectl get podex -n %s -o wide shows MATCHED 0 for those that waive nothing now), "+
			"or ask a cluster admin to raise the limit", pe.Namespace, len(list), r.MaxPerNamespace, len(list)-r.MaxPerNamespace, pe.Namespace)}, false, nil
}

// namespaceExceptions lists a namespace's PolicyExceptions from the cache,
// ordered oldest first (compareAge), without copying them: they are only
// read.
func (r *PolicyExceptionReconciler) namespaceExceptions(ctx context.Context, namespace string) ([]policyv1alpha1.PolicyException, error) {
	var list policyv1alpha1.PolicyExceptionList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the PolicyExceptions of namespace %q: %w", namespace, err)
	}
	slices.SortFunc(list.Items, compareAge)
	return list.Items, nil
}

// compareAge orders exceptions oldest first: by creationTimestamp, then
// name (timestamps have a resolution of a second).
func compareAge(a, b policyv1alpha1.PolicyException) int {
	return ageOrder(&a, &b)
}

// olderThan reports whether a comes before b in compareAge's order.
func olderThan(a, b *policyv1alpha1.PolicyException) bool { return ageOrder(a, b) < 0 }

func ageOrder(a, b *policyv1alpha1.PolicyException) int {
	return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
}

// atLimit maps any change of a namespace's PolicyExceptions to the ones
// whose side of the limit it may have moved: when the namespace holds at
// least MaxPerNamespace, those from the last within the limit on. A
// deletion lets the oldest beyond the limit in; a creation with the same
// timestamp and an earlier name pushes the last within out.
func (r *PolicyExceptionReconciler) atLimit(ctx context.Context, obj client.Object) []reconcile.Request {
	if r.MaxPerNamespace <= 0 {
		return nil
	}
	list, err := r.namespaceExceptions(ctx, obj.GetNamespace())
	if err != nil {
		log.FromContext(ctx).Error(err, "list the exceptions of a namespace", "namespace", obj.GetNamespace())
		return nil
	}
	if len(list) < r.MaxPerNamespace {
		return nil
	}
	var out []reconcile.Request
	for i := r.MaxPerNamespace - 1; i < len(list); i++ {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list[i])})
	}
	return out
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
	stalled, _ := exceptionStalled(st.Ready, st.Reason, pe.CreationTimestamp.Time, r.Clock.Now())
	setStalled(&status.Conditions, pe.Generation, stalled, st.Reason, st.Message)
	patched, err := kube.PolicyExceptionStatus.Apply(ctx, r.Client, pe, status)
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

func (r *PolicyExceptionReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&policyv1alpha1.PolicyException{}).
		// The limit per namespace: a creation or deletion may move another
		// exception of the namespace across it; an update may not (it
		// changes neither creationTimestamp nor name) unless it starts the
		// deletion. Without the predicate, every label edit or status
		// write re-judged the namespace's exceptions beyond the limit.
		Watches(&policyv1alpha1.PolicyException{}, handler.EnqueueRequestsFromMapFunc(r.atLimit),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: mayMoveLimit})).
		WatchesRawSource(source.Func(r.policyChanges)).
		WatchesRawSource(onElection(mgr, requestsFor(mgr.GetClient(), &policyv1alpha1.PolicyExceptionList{}))).
		Named("policyexception").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// mayMoveLimit reports whether an update of a PolicyException may move
// another across its namespace's limit: only the start of its deletion.
func mayMoveLimit(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
}

// policyChanges re-judges the exceptions that name a policy when the index
// says that the policy's compiled form changed or that it left the index:
// once the index has the change, which a watch on the SecurityPolicy would
// judge against before it.
func (r *PolicyExceptionReconciler) policyChanges(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.Index.OnChange(func(c index.Change) {
		if c.Kind != index.ChangedPolicy {
			return
		}
		// Under the index's writer lock: a lookup in the cache's field
		// index, in memory, and queueing; nothing that waits.
		for _, req := range r.exceptionsOfPolicy(ctx, c.Name) {
			q.Add(req)
		}
	})
	return nil
}

// exceptionsOfPolicy are the exceptions that name a policy.
func (r *PolicyExceptionReconciler) exceptionsOfPolicy(ctx context.Context, policy string) []reconcile.Request {
	var list policyv1alpha1.PolicyExceptionList
	if err := r.List(ctx, &list, client.MatchingFields{IndexExceptionPolicy: policy}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list the exceptions of a policy", "policy", policy)
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}
