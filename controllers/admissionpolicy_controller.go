package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/admissionpolicy"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/kube"
)

// The API server's own form of the policies (internal/admissionpolicy):
// on the leader, one ValidatingAdmissionPolicy and its bindings per
// SecurityPolicy in force, and one PodSecurityParams object per namespace
// holding the PolicyExceptions in force there, kept from the same index the
// webhook decides with. An exception that turns Active is added to the
// parameters; one that expires, is deleted or stops being permitted leaves
// the index and so the parameters.

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy.podsieve.dev,resources=podsecurityparams,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// AdmissionPolicyReconciler keeps a SecurityPolicy's
// ValidatingAdmissionPolicy and bindings and its EnforcedByAPIServer
// condition. It runs on the leader only.
type AdmissionPolicyReconciler struct {
	client.Client
	Index *index.Index
	Clock clock.PassiveClock
	// Options are what the compiled objects depend on (the namespaces
	// never enforced).
	Options admissionpolicy.Options
	// Enabled is --admission-policies, when the API server serves
	// ValidatingAdmissionPolicy v1. Off, the reconciler removes what it
	// compiled before and says Disabled.
	Enabled bool
	// WebhookConfiguration, when set, is podsieve's
	// ValidatingWebhookConfiguration: the namespaces its pod webhooks
	// exclude by name (the chart's webhooks.excludeNamespaces) are left
	// alone by the compiled policies too.
	WebhookConfiguration string
}

// podWebhook is the webhook of podsieve's configuration that sends pods
// (config/webhook/manifests.yaml); its opt-out twin excludes the same
// namespaces.
const podWebhook = "pods.podsieve.dev"

// options are r.Options with the namespaces the pod webhook excludes by
// name added to the system namespaces.
func (r *AdmissionPolicyReconciler) options(ctx context.Context) (admissionpolicy.Options, error) {
	opts := r.Options
	if r.WebhookConfiguration == "" {
		return opts, nil
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.Get(ctx, client.ObjectKey{Name: r.WebhookConfiguration}, &vwc); err != nil {
		return opts, client.IgnoreNotFound(err)
	}
	excluded := slices.Clone(opts.SystemNamespaces)
	for _, w := range vwc.Webhooks {
		if w.Name != podWebhook || w.NamespaceSelector == nil {
			continue
		}
		for _, e := range w.NamespaceSelector.MatchExpressions {
			if e.Key == engine.NamespaceNameLabel && e.Operator == metav1.LabelSelectorOpNotIn {
				for _, ns := range e.Values {
					if !slices.Contains(excluded, ns) {
						excluded = append(excluded, ns)
					}
				}
			}
		}
	}
	opts.SystemNamespaces = excluded
	return opts, nil
}

// Reconcile brings the ValidatingAdmissionPolicy and bindings of one
// SecurityPolicy in step with the policy the index holds in force, and
// writes its EnforcedByAPIServer condition.
func (r *AdmissionPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sp policyv1alpha1.SecurityPolicy
	if err := r.Get(ctx, req.NamespacedName, &sp); err != nil {
		if apierrors.IsNotFound(err) {
			setEnforcedByAPIServer(req.Name, false, true)
			// Owner references collect them too; removing them now
			// does not wait for the garbage collector.
			return ctrl.Result{}, r.remove(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	cond, requeue, err := r.enforce(ctx, &sp)
	if cond != nil || err != nil {
		setEnforcedByAPIServer(sp.Name, err == nil && cond != nil && cond.Status == metav1.ConditionTrue, !r.Enabled)
	}
	if err != nil {
		cond = &metav1.Condition{Status: metav1.ConditionFalse, Reason: policyv1alpha1.ReasonAdmissionPolicyFailed,
			Message: fmt.Sprintf("the API server refused the compiled ValidatingAdmissionPolicy: %v; only the webhook enforces", err)}
	}
	if cond != nil {
		cond.ObservedGeneration = sp.Generation
		cond.Message = truncate(cond.Message, 32768)
		if werr := kube.ApplyPolicyCondition(ctx, r.Client, &sp, kube.PolicyAdmissionPolicies, policyv1alpha1.ConditionEnforcedByAPIServer,
			cond, r.Clock.Now()); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, err
}

// enforce brings the API server's form of sp in step with the index and
// says what the condition is; nil when it must wait for the index.
func (r *AdmissionPolicyReconciler) enforce(ctx context.Context, sp *policyv1alpha1.SecurityPolicy) (*metav1.Condition, time.Duration, error) {
	off := func(reason, message string) (*metav1.Condition, time.Duration, error) {
		return &metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: message}, 0, r.remove(ctx, sp.Name)
	}
	if !r.Enabled {
		return off(policyv1alpha1.ReasonAdmissionPolicyDisabled,
			"podsieve runs with --admission-policies=false, or the API server does not serve ValidatingAdmissionPolicy v1: only the webhook enforces")
	}
	p := r.Index.Snapshot().Policy(sp.Name)
	ready := meta.FindStatusCondition(sp.Status.Conditions, policyv1alpha1.ConditionReady)
	judged := ready != nil && ready.ObservedGeneration == sp.Generation
	switch {
	case p == nil && judged:
		return off(policyv1alpha1.ReasonAdmissionPolicyNotInForce, "the policy is not in force (see its Ready condition): nothing of it is compiled")
	case p == nil || (p.Generation != sp.Generation && !judged):
		// The index has not caught up with this generation yet; its
		// change enqueues the policy again.
		return nil, time.Second, nil
	case p.Generation != sp.Generation || len(p.Strict) > 0:
		return off(policyv1alpha1.ReasonAdmissionPolicyDegraded, fmt.Sprintf(
			"generation %d is not enforced as written (see its Ready condition): the API server's form is removed until the spec compiles; only the webhook enforces",
			sp.Generation))
	}
	opts, err := r.options(ctx)
	if err != nil {
		return nil, 0, err
	}
	compiled, err := admissionpolicy.CompilePolicy(sp, p, opts)
	var unsupported *admissionpolicy.Unsupported
	if errors.As(err, &unsupported) {
		return off(policyv1alpha1.ReasonAdmissionPolicyUnsupported, unsupported.Error()+"; only the webhook enforces")
	}
	if err != nil {
		return nil, 0, err
	}
	owner := metav1.OwnerReference{APIVersion: policyv1alpha1.GroupVersion.String(), Kind: "SecurityPolicy", Name: sp.Name, UID: sp.UID}
	objs := []client.Object{compiled.Policy}
	for _, b := range compiled.Bindings {
		objs = append(objs, b)
	}
	for _, obj := range objs {
		obj.SetOwnerReferences([]metav1.OwnerReference{owner})
		if err := r.apply(ctx, obj); err != nil {
			return nil, 0, err
		}
	}
	return &metav1.Condition{Status: metav1.ConditionTrue, Reason: policyv1alpha1.ReasonAdmissionPolicyApplied,
		Message: fmt.Sprintf("generation %d is enforced by the API server itself: ValidatingAdmissionPolicy %s, bound with action %s",
			sp.Generation, compiled.Policy.Name, compiled.Bindings[0].Spec.ValidationActions[0])}, 0, nil
}

// apply creates obj or updates it to what was compiled.
func (r *AdmissionPolicyReconciler) apply(ctx context.Context, obj client.Object) error {
	return createOrUpdate(ctx, r.Client, obj)
}

// remove deletes the objects compiled from a policy.
func (r *AdmissionPolicyReconciler) remove(ctx context.Context, policy string) error {
	sel := client.MatchingLabels{admissionpolicy.ManagedByLabel: admissionpolicy.ManagedBy, admissionpolicy.PolicyLabel: policy}
	return errors.Join(
		client.IgnoreNotFound(r.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, sel)),
		client.IgnoreNotFound(r.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{}, sel)),
	)
}

func (r *AdmissionPolicyReconciler) setup(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&policyv1alpha1.SecurityPolicy{}).
		WatchesRawSource(source.Func(r.policyChanges)).
		Named("admissionpolicy")
	if r.Enabled {
		// Repair what someone else changed or deleted.
		b = b.Owns(&admissionregistrationv1.ValidatingAdmissionPolicy{}).
			Owns(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
	}
	if r.Enabled && r.WebhookConfiguration != "" {
		// The webhook's excluded namespaces are the compiled policies' too.
		b = b.Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, obj client.Object) []reconcile.Request {
				if obj.GetName() != r.WebhookConfiguration {
					return nil
				}
				var list policyv1alpha1.SecurityPolicyList
				if err := r.List(ctx, &list); err != nil {
					log.FromContext(ctx).Error(err, "list the SecurityPolicies to compile again")
					return nil
				}
				out := make([]reconcile.Request, len(list.Items))
				for i := range list.Items {
					out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}}
				}
				return out
			}))
	}
	return b.Complete(r)
}

// policyChanges enqueues a policy whose compiled form changed in the index.
func (r *AdmissionPolicyReconciler) policyChanges(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.Index.OnChange(func(c index.Change) {
		switch c.Kind {
		case index.ChangedPolicy:
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: c.Name}})
		case index.ChangedAll:
			for _, p := range c.New.Policies() {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: p.Name}})
			}
		}
	})
	return nil
}

// AdmissionParamsReconciler keeps each namespace's PodSecurityParams: the
// PolicyExceptions in force there, as the index holds them. It runs on the
// leader only.
type AdmissionParamsReconciler struct {
	client.Client
	Index *index.Index
	// Clock tells the time the refusals of exceptions not in force are
	// judged at.
	Clock   clock.PassiveClock
	Options admissionpolicy.Options
	// ExceptionsNamespace is the cluster exceptions namespace, whose
	// exceptions may reach every namespace.
	ExceptionsNamespace string
	Enabled             bool
}

// Reconcile brings the PodSecurityParams of one namespace in step with the
// exceptions in force there.
func (r *AdmissionParamsReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Name
	key := client.ObjectKey{Namespace: ns, Name: admissionpolicy.ParamsName}
	snap := r.Index.Snapshot()
	if !r.Enabled || slices.Contains(r.Options.SystemNamespaces, ns) || !anyHonoursExceptions(snap) {
		return ctrl.Result{}, r.removeParams(ctx, key)
	}
	var namespace corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err != nil || !namespace.DeletionTimestamp.IsZero() {
		// Its objects go with the namespace.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	get := func(namespace, name string) (*policyv1alpha1.PolicyException, error) {
		var pe policyv1alpha1.PolicyException
		return &pe, r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pe)
	}
	params := admissionpolicy.CompileNamespaceParams(ns, snap.InForce(ns, namespace.Labels), snap.Inactive(ns, namespace.Labels), snap.Policy, get, r.Clock.Now())
	for _, err := range params.Errs {
		log.FromContext(ctx).Error(err, "compile an exception for the API server")
	}
	if len(params.Dropped) > 0 {
		// Left out, they waive nothing in the API server: it refuses
		// more than the webhook, never less.
		names := make([]string, len(params.Dropped))
		for i, e := range params.Dropped {
			names[i] = e.Source
		}
		log.FromContext(ctx).Error(nil, "the namespace's exceptions exceed what its PodSecurityParams holds; these waive nothing in the API server (the webhook still honours them)",
			"namespace", ns, "limitBytes", admissionpolicy.MaxParamsBytes, "exceptions", names)
	}
	if err := createOrUpdate(ctx, r.Client, params.Object); err != nil {
		return ctrl.Result{}, err
	}
	// An exception the cache and the index disagree on is left out (it
	// waives nothing in the API server meanwhile) until the index has
	// judged what the cache holds.
	if params.Pending {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

func (r *AdmissionParamsReconciler) removeParams(ctx context.Context, key client.ObjectKey) error {
	err := r.Delete(ctx, &policyv1alpha1.PodSecurityParams{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// anyHonoursExceptions reports whether some policy in force reads
// parameters.
func anyHonoursExceptions(snap *index.Snapshot) bool {
	for _, p := range snap.Policies() {
		if p.PermitsAny() {
			return true
		}
	}
	return false
}

func (r *AdmissionParamsReconciler) setup(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Namespace{}).
		WatchesRawSource(source.Func(r.indexChanges)).
		Named("admissionparams")
	if r.Enabled {
		// What the API server waives is what these objects hold: an edit
		// or a deletion by anyone else is written back at once.
		b = b.Watches(&policyv1alpha1.PodSecurityParams{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, obj client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: obj.GetNamespace()}}}
			}))
	}
	return b.Complete(r)
}

// indexChanges enqueues the namespaces whose parameters a change of the
// index may change: an exception's own namespace, every namespace for a
// cross-namespace exception, a policy or a reload, one namespace for its
// labels (which decide the cross-namespace exceptions that reach it).
func (r *AdmissionParamsReconciler) indexChanges(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.Index.OnChange(func(c index.Change) {
		all := func() {
			for _, ns := range c.New.Namespaces() {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: ns}})
			}
		}
		switch c.Kind {
		case index.ChangedException:
			if c.Namespace == r.ExceptionsNamespace {
				all()
				return
			}
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: c.Namespace}})
		case index.ChangedNamespace:
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: c.Name}})
		default:
			all()
		}
	})
	return nil
}

// createOrUpdate creates obj, or sets the object of its name to its labels,
// annotations, owners and spec, writing only when they differ from what the
// API server holds (a spec the API server defaults further is written
// again, which changes nothing there).
func createOrUpdate(ctx context.Context, c client.Client, obj client.Object) error {
	want := obj.DeepCopyObject().(client.Object)
	_, err := controllerutil.CreateOrUpdate(ctx, c, obj, func() error {
		obj.SetLabels(want.GetLabels())
		obj.SetAnnotations(want.GetAnnotations())
		obj.SetOwnerReferences(want.GetOwnerReferences())
		switch w := want.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec = w.Spec
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec = w.Spec
		case *policyv1alpha1.PodSecurityParams:
			obj.(*policyv1alpha1.PodSecurityParams).Spec = w.Spec
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// paramsGuard keeps, on the leader, the ValidatingAdmissionPolicy that
// refuses PodSecurityParams written by anyone but this manager
// (admissionpolicy.ParamsGuard), naming the user the API server knows it
// as; off, it removes it.
type paramsGuard struct {
	client  client.Client
	enabled bool
}

func (g *paramsGuard) Start(ctx context.Context) error {
	vap, binding := admissionpolicy.ParamsGuard("")
	if !g.enabled {
		err := errors.Join(client.IgnoreNotFound(g.client.Delete(ctx, binding)), client.IgnoreNotFound(g.client.Delete(ctx, vap)))
		if err != nil && !meta.IsNoMatchError(err) {
			log.FromContext(ctx).Error(err, "remove the ValidatingAdmissionPolicy that guards PodSecurityParams")
		}
		return nil
	}
	return wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := g.apply(ctx); err != nil {
			log.FromContext(ctx).Error(err, "keep the ValidatingAdmissionPolicy that guards PodSecurityParams; retrying")
			return false, nil
		}
		return true, nil
	})
}

// apply asks the API server who the manager is and guards the parameters
// for that user.
func (g *paramsGuard) apply(ctx context.Context) error {
	review := &authenticationv1.SelfSubjectReview{}
	if err := g.client.Create(ctx, review); err != nil {
		return fmt.Errorf("ask the API server who podsieve is (SelfSubjectReview): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return errors.New("the API server names no user for podsieve (SelfSubjectReview)")
	}
	vap, binding := admissionpolicy.ParamsGuard(review.Status.UserInfo.Username)
	return errors.Join(createOrUpdate(ctx, g.client, vap), createOrUpdate(ctx, g.client, binding))
}
