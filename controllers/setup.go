// Package controllers holds the reconcilers that keep the index true to the
// API server and tell users, through status conditions and events, what is in
// force: SecurityPolicies compiled, PolicyExceptions judged, Namespaces'
// labels.
//
// Every replica runs the reconcilers, so that every replica's index can serve
// the webhook; only the leader writes status and events. The reconcilers
// hear of each other's changes through the index (index.OnChange), never
// from each other. Setup also wires what reads the index on the leader, the
// background scan (package controllers/background), and the record of
// exceptions applied that becomes status.lastAppliedTime (ExceptionUsage).
package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/admissionpolicy"
	"github.com/podsieve/podsieve/internal/index"
)

// IndexExceptionPolicy indexes PolicyExceptions by the names of the
// policies they target.
const IndexExceptionPolicy = "spec.exceptions.policyName"

// Options configure the controllers.
type Options struct {
	// ExceptionsNamespace is the cluster exceptions namespace: only there may
	// an exception reach other namespaces.
	ExceptionsNamespace string
	// Clock tells the time for expiry; the real clock when nil.
	Clock clock.PassiveClock
	// Background configures the background scan, which runs on the leader
	// (package background). Setup fills in its ExceptionsNamespace, Clock
	// and ExceptionsApplied from these options.
	Background background.Options
	// Usage records which exceptions waived something and when, for
	// status.lastAppliedTime; pass the same record to the webhook. A new
	// one when nil (then only the background scan fills it).
	Usage *ExceptionUsage
	// WebhookConfiguration, when set, is podsieve's
	// ValidatingWebhookConfiguration, checked to exclude OwnNamespace from
	// its pod webhooks (WebhookConfigurationReconciler).
	WebhookConfiguration, OwnNamespace string
	// MaxExceptionsPerNamespace is how many PolicyExceptions of one
	// namespace are judged and held in the index; the newest beyond it are
	// Ready=False with reason LimitExceeded. 0 sets no limit.
	MaxExceptionsPerNamespace int
	// AdmissionPolicies keeps the API server's own form of the policies
	// (ValidatingAdmissionPolicies, their bindings and each namespace's
	// PodSecurityParams) on the leader, so that enforcement holds while no
	// replica answers; off, what an earlier run compiled is removed. The
	// caller checks that the API server serves ValidatingAdmissionPolicy
	// v1.
	AdmissionPolicies bool
}

// ReportingController is the reportingController of podsieve's events
// (events.k8s.io/v1; reportingComponent in core/v1, FROM in kubectl
// describe). Their reportingInstance is it, a dash and the replica's host
// name (its pod's name). Anyone allowed to create Events in a namespace can
// write the same fields: docs/background.md says what can be trusted.
const ReportingController = "podsieve"

// Leader election, for the manager's status writers; controller-runtime
// records its events through the core Events API.
// +kubebuilder:rbac:groups="",namespace=podsieve-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=podsieve-system,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Setup registers the field indexer and the controllers with mgr and returns
// the index they keep. The index reports Ready once every object the caches
// held at start has been reconciled.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) (*index.Index, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &policyv1alpha1.PolicyException{}, IndexExceptionPolicy, exceptionPolicies); err != nil {
		return nil, fmt.Errorf("index PolicyExceptions by policy: %w", err)
	}
	ix := index.New(opts.ExceptionsNamespace)
	metricsIndex.Store(ix)
	sync := newSyncTracker(ix)
	leader := &leadership{elected: mgr.Elected()}
	metricsLeader.Store(leader)
	recorder := mgr.GetEventRecorder(ReportingController)

	if err := (&SecurityPolicyReconciler{
		Client: mgr.GetClient(), Index: ix, Recorder: recorder, leader: leader, sync: sync,
	}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&PolicyExceptionReconciler{
		Client: mgr.GetClient(), Index: ix, Recorder: recorder, Clock: opts.Clock, leader: leader, sync: sync,
		ExceptionsNamespace: opts.ExceptionsNamespace, MaxPerNamespace: opts.MaxExceptionsPerNamespace,
	}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&NamespaceReconciler{Client: mgr.GetClient(), Index: ix, sync: sync}).setup(mgr); err != nil {
		return nil, err
	}
	ap := admissionpolicy.Options{SystemNamespaces: systemNamespaces(opts)}
	if err := (&AdmissionPolicyReconciler{
		Client: mgr.GetClient(), Index: ix, Clock: opts.Clock, Options: ap, Enabled: opts.AdmissionPolicies,
		WebhookConfiguration: opts.WebhookConfiguration,
	}).setup(mgr); err != nil {
		return nil, err
	}
	if err := (&AdmissionParamsReconciler{
		Client: mgr.GetClient(), Index: ix, Clock: opts.Clock, Options: ap, ExceptionsNamespace: opts.ExceptionsNamespace, Enabled: opts.AdmissionPolicies,
	}).setup(mgr); err != nil {
		return nil, err
	}
	if err := mgr.Add(&paramsGuard{client: mgr.GetClient(), enabled: opts.AdmissionPolicies}); err != nil {
		return nil, err
	}
	if opts.WebhookConfiguration != "" {
		if err := (&WebhookConfigurationReconciler{
			Client: mgr.GetClient(), Name: opts.WebhookConfiguration, Namespace: opts.OwnNamespace,
		}).setup(mgr); err != nil {
			return nil, err
		}
	}
	if opts.Usage == nil {
		opts.Usage = NewExceptionUsage()
	}
	scan := opts.Background
	scan.ExceptionsNamespace, scan.Clock, scan.ExceptionsApplied = opts.ExceptionsNamespace, opts.Clock, opts.Usage.Applied
	// The API server enforces the compiled policies: the scan holds them
	// equal to the engine on the cluster's objects.
	scan.CrossCheck = opts.AdmissionPolicies
	scan.Default()
	if err := background.Setup(mgr, ix, scan); err != nil {
		return nil, err
	}
	if err := mgr.Add(&usageFlusher{client: mgr.GetClient(), usage: opts.Usage, interval: scan.StatusInterval}); err != nil {
		return nil, err
	}
	// After the caches sync, note what they hold: the index is ready when
	// each of those objects has been reconciled once.
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("caches did not sync")
		}
		return sync.listInitial(ctx, mgr.GetClient())
	})); err != nil {
		return nil, err
	}
	return ix, nil
}

// systemNamespaces are the namespaces the webhook's configuration never
// sends to podsieve, which the API server's form of the policies leaves
// alone too: kube-system and podsieve's own.
func systemNamespaces(opts Options) []string {
	out := []string{"kube-system"}
	for _, ns := range []string{opts.OwnNamespace, opts.ExceptionsNamespace} {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// CacheOptions are the manager's cache settings that the controllers and
// the background scan are written for. The scan caches every pod and
// pod-bearing workload, so what nothing reads is dropped: managed fields
// everywhere, pods' status (decisions read the spec), a controller's own
// labels and annotations (stripWorkload), and a PolicyException's metadata
// beyond its identity (stripException).
// PolicyReports are not cached at all (see background.Scanner).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                     {Transform: stripPod},
			&policyv1alpha1.PolicyException{}: {Transform: stripException},
			&appsv1.Deployment{}:              {Transform: stripWorkload},
			&appsv1.ReplicaSet{}:              {Transform: stripWorkload},
			&appsv1.StatefulSet{}:             {Transform: stripWorkload},
			&appsv1.DaemonSet{}:               {Transform: stripWorkload},
			&batchv1.Job{}:                    {Transform: stripWorkload},
			&batchv1.CronJob{}:                {Transform: stripWorkload},
			&corev1.ReplicationController{}:   {Transform: stripWorkload},
		},
	}
}

// stripWorkload drops a pod-bearing controller's own labels, annotations
// (kubectl's last-applied-configuration among them, a copy of the object)
// and managed fields. Decisions read its pod template's labels and
// annotations, the scan its spec, owners and generation; nothing reads the
// controller's own, which its namespace's editors write, up to the API
// server's limit on an object. A pod keeps its own: they are its template.
func stripWorkload(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetLabels(nil)
		o.SetAnnotations(nil)
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// stripException is the cache transform of PolicyExceptions: it keeps what
// podsieve reads (the reconciler, the field index, the usage record, the
// background counters, events): the exception's identity, generation, age
// and deletion, its spec and its status. Its labels, annotations, managed
// fields, finalizers and owner references are a namespace editor's to
// write, bounded only by the API server's limit on an object (about
// 1.5 MiB), and nothing in podsieve reads them; cached, they would let one
// editor make each exception cost every replica megabytes. The spec is
// bounded by the schema and status is written by podsieve alone.
//
// Nothing may Update a PolicyException read from the cache: the update
// would drop what was stripped. Status is written with patches.
func stripException(obj any) (any, error) {
	pe, ok := obj.(*policyv1alpha1.PolicyException)
	if !ok {
		return obj, nil
	}
	pe.ObjectMeta = metav1.ObjectMeta{
		Name: pe.Name, Namespace: pe.Namespace, UID: pe.UID, ResourceVersion: pe.ResourceVersion,
		Generation: pe.Generation, CreationTimestamp: pe.CreationTimestamp, DeletionTimestamp: pe.DeletionTimestamp,
	}
	return pe, nil
}

func stripPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
		p.Status = corev1.PodStatus{}
	}
	return obj, nil
}

func exceptionPolicies(obj client.Object) []string {
	pe := obj.(*policyv1alpha1.PolicyException)
	var out []string
	for _, t := range pe.Spec.Exceptions {
		out = append(out, t.PolicyName)
	}
	return out
}

// leadership tells whether this replica may write status and events.
type leadership struct{ elected <-chan struct{} }

func (l *leadership) isLeader() bool {
	select {
	case <-l.elected:
		return true
	default:
		return false
	}
}

// everyReplica is a runnable that runs whether or not this replica leads.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// onElection is a source that queues every object listed once this
// replica is elected: a newly elected leader rewrites every status, which
// may have been written by an older leader from an older spec, or not at
// all. A failed list (of the cache) is tried again every second.
func onElection(mgr manager.Manager, list func(context.Context) ([]reconcile.Request, error)) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			select {
			case <-mgr.Elected():
			case <-ctx.Done():
				return
			}
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				return
			}
			_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				reqs, err := list(ctx)
				if err != nil {
					log.FromContext(ctx).Error(err, "list the objects whose status a new leader rewrites; retrying")
					return false, nil
				}
				for _, r := range reqs {
					q.Add(r)
				}
				return true, nil
			})
		}()
		return nil
	})
}

// requestsFor lists a kind's objects as reconcile requests.
func requestsFor(c client.Reader, list client.ObjectList) func(context.Context) ([]reconcile.Request, error) {
	return func(ctx context.Context) ([]reconcile.Request, error) {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		var out []reconcile.Request
		if err := meta.EachListItem(l, func(obj runtime.Object) error {
			o := obj.(client.Object)
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
			return nil
		}); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// requeueSoon is how long an exception waits for its policy's first
// reconcile at start, instead of reporting PolicyNotFound meanwhile.
const requeueSoon = 200 * time.Millisecond
