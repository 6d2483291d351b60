package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"golang.org/x/time/rate"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/report"
)

// BackgroundOptions configure the background scan.
type BackgroundOptions struct {
	// Disabled turns the scan off.
	Disabled bool
	// ResyncPeriod is how often every namespace is scanned again, to catch
	// anything an event missed; 1h when zero.
	ResyncPeriod time.Duration
	// Batch is how long a namespace waits after a change before it is
	// scanned, so that a burst of changes (a rollout) costs one scan; 1s
	// when zero.
	Batch time.Duration
	// StatusInterval is how often the counters in SecurityPolicy and
	// PolicyException status are written; 10s when zero.
	StatusInterval time.Duration
	// WritesPerSecond bounds report writes to the API server; 20 when zero.
	WritesPerSecond float64
}

func (o *BackgroundOptions) defaults() {
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = time.Hour
	}
	if o.Batch == 0 {
		o.Batch = time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = 10 * time.Second
	}
	if o.WritesPerSecond == 0 {
		o.WritesPerSecond = 20
	}
}

// Scanned kinds: pods, which are what runs, and the pod-bearing controllers
// that no other controller owns (a ReplicaSet of a Deployment or a Job of a
// CronJob repeats its owner's template, so it is the owner that is reported).
// +kubebuilder:rbac:groups="",resources=pods;replicationcontrollers,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets;daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;list;watch;create;update;patch;delete

// scannedKind is one kind the scan reads.
type scannedKind struct {
	gvk     schema.GroupVersionKind
	object  func() client.Object
	list    func() client.ObjectList
	items   func(client.ObjectList) []client.Object
	topOnly bool // skip objects that a controller owns
}

func kindOf[T any, PT interface {
	*T
	client.Object
}, L any, PL interface {
	*L
	client.ObjectList
}](gv schema.GroupVersion, kind policyv1alpha1.PodBearingKind, topOnly bool, items func(*L) []T) scannedKind {
	return scannedKind{
		gvk:    gv.WithKind(string(kind)),
		object: func() client.Object { return PT(new(T)) },
		list:   func() client.ObjectList { return PL(new(L)) },
		items: func(l client.ObjectList) []client.Object {
			its := items(l.(PL))
			out := make([]client.Object, len(its))
			for i := range its {
				out[i] = PT(&its[i])
			}
			return out
		},
		topOnly: topOnly,
	}
}

var scannedKinds = []scannedKind{
	kindOf[corev1.Pod](corev1.SchemeGroupVersion, policyv1alpha1.KindPod, false, func(l *corev1.PodList) []corev1.Pod { return l.Items }),
	kindOf[appsv1.Deployment](appsv1.SchemeGroupVersion, policyv1alpha1.KindDeployment, true, func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items }),
	kindOf[appsv1.ReplicaSet](appsv1.SchemeGroupVersion, policyv1alpha1.KindReplicaSet, true, func(l *appsv1.ReplicaSetList) []appsv1.ReplicaSet { return l.Items }),
	kindOf[appsv1.StatefulSet](appsv1.SchemeGroupVersion, policyv1alpha1.KindStatefulSet, true, func(l *appsv1.StatefulSetList) []appsv1.StatefulSet { return l.Items }),
	kindOf[appsv1.DaemonSet](appsv1.SchemeGroupVersion, policyv1alpha1.KindDaemonSet, true, func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items }),
	kindOf[batchv1.Job](batchv1.SchemeGroupVersion, policyv1alpha1.KindJob, true, func(l *batchv1.JobList) []batchv1.Job { return l.Items }),
	kindOf[batchv1.CronJob](batchv1.SchemeGroupVersion, policyv1alpha1.KindCronJob, true, func(l *batchv1.CronJobList) []batchv1.CronJob { return l.Items }),
	kindOf[corev1.ReplicationController](corev1.SchemeGroupVersion, policyv1alpha1.KindReplicationController, true, func(l *corev1.ReplicationControllerList) []corev1.ReplicationController {
		return l.Items
	}),
}

// Scanner is the background scan. It runs on the leader only: it decides
// the objects that exist, from the manager's cache, with the index and the
// engine the webhook uses (background mode: only policies and exceptions
// with background: true), writes a namespace's results as PolicyReports and
// keeps the counters in SecurityPolicy and PolicyException status.
//
// Work is per namespace, in one worker, with report writes rate-limited, so
// that a policy change in a large cluster does not compete with the webhook
// for more than one core or flood the API server. A namespace is scanned
// again when something that can change its results changes: the index (a
// policy, an exception, the namespace's labels) or one of its objects; and
// every namespace is scanned again each ResyncPeriod.
type Scanner struct {
	client client.Client
	// reports reads PolicyReports from the API server itself: caching
	// them would need the CRD before the manager starts, would hold other
	// tools' reports too, and would answer with reports older than the
	// scan's own last writes.
	reports          client.Reader
	cache            cache.Cache
	discovery        discovery.DiscoveryInterface
	index            *index.Index
	clock            clock.PassiveClock
	clusterNamespace string
	opts             BackgroundOptions
	queue            workqueue.TypedRateLimitingInterface[string]
	writes           *rate.Limiter
	usage            *ExceptionUsage

	mu sync.Mutex
	// stats are the last scan's counters of each namespace.
	stats map[string]namespaceStats
	// initialPending are the namespaces of the first resync not scanned
	// yet; nil until it listed them.
	initialPending map[string]bool
}

// namespaceStats are what one namespace's scan found.
type namespaceStats struct {
	violations map[string]int // uncovered violations, by policy
	matched    map[string]int // objects waived something, by exception namespace/name
}

func newScanner(c client.Client, reports client.Reader, ca cache.Cache, dc discovery.DiscoveryInterface, ix *index.Index, clk clock.PassiveClock,
	clusterNamespace string, usage *ExceptionUsage, opts BackgroundOptions) *Scanner {
	opts.defaults()
	s := &Scanner{
		client: c, reports: reports, cache: ca, discovery: dc, index: ix, clock: clk, clusterNamespace: clusterNamespace, opts: opts, usage: usage,
		// A namespace whose scan fails is retried with exponential backoff,
		// from 1s up to 5 minutes, so that a lasting error (RBAC, another
		// admission webhook refusing reports) costs little.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "background_scan"}),
		writes: rate.NewLimiter(rate.Limit(opts.WritesPerSecond), max(1, int(opts.WritesPerSecond))),
		stats:  map[string]namespaceStats{},
	}
	// Every replica keeps the index; only the leader scans. The queue holds
	// at most one entry per namespace, so on other replicas it stays small.
	ix.OnChange(s.indexChanged)
	return s
}

// indexChanged queues the namespaces whose results a change can affect.
func (s *Scanner) indexChanged(c index.Change) {
	switch c.Kind {
	case index.ChangedNamespace:
		s.queue.AddAfter(c.Name, s.opts.Batch)
	case index.ChangedException:
		if c.Namespace == s.clusterNamespace {
			// Its exceptions may reach any namespace.
			s.queueAll(c.New)
			return
		}
		s.queue.AddAfter(c.Namespace, s.opts.Batch)
	case index.ChangedPolicy:
		old, cur := c.Old.Policy(c.Name), c.New.Policy(c.Name)
		for _, ns := range c.New.Namespaces() {
			labels := c.New.NamespaceLabels(ns)
			if (old != nil && old.MayMatchNamespace(ns, labels)) || (cur != nil && cur.MayMatchNamespace(ns, labels)) {
				s.queue.AddAfter(ns, s.opts.Batch)
			}
		}
	default:
		s.queueAll(c.New)
	}
}

func (s *Scanner) queueAll(snap *index.Snapshot) {
	for _, ns := range snap.Namespaces() {
		s.queue.AddAfter(ns, s.opts.Batch)
	}
}

// NeedLeaderElection: only the leader scans and writes reports.
func (s *Scanner) NeedLeaderElection() bool { return true }

// Start runs the scan until ctx ends. Without the PolicyReport CRD there is
// nowhere to write results: the scan stays off, says so, and turns on when
// the CRD appears.
func (s *Scanner) Start(ctx context.Context) error {
	defer s.queue.ShutDown()
	logger := log.FromContext(ctx).WithName("background")
	if !s.cache.WaitForCacheSync(ctx) {
		return errors.New("background scan: caches did not sync")
	}
	if s.opts.Disabled {
		// What an earlier scan wrote would otherwise stay, stale, forever.
		logger.Info("background scan is off (--background-scan=false); removing the counters and PolicyReports an earlier scan wrote")
		if err := s.clear(ctx, true); err != nil && ctx.Err() == nil {
			logger.Error(err, "remove the background scan's counters and PolicyReports")
		}
		return nil
	}
	if !s.waitForReportCRD(ctx) {
		return nil
	}
	for !s.index.Ready() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, k := range scannedKinds {
		inf, err := s.cache.GetInformer(ctx, k.object())
		if err != nil {
			return fmt.Errorf("background scan: watch %s: %w", k.gvk.Kind, err)
		}
		if _, err := inf.AddEventHandler(s.objectHandler()); err != nil {
			return fmt.Errorf("background scan: watch %s: %w", k.gvk.Kind, err)
		}
	}
	logger.Info("background scan is on", "resyncPeriod", s.opts.ResyncPeriod)
	go s.resync(ctx)
	go s.flushStatus(ctx)
	go func() {
		<-ctx.Done()
		s.queue.ShutDown() // unblocks the worker's Get
	}()
	for s.work(ctx) {
	}
	return nil
}

// waitForReportCRD reports whether the PolicyReport kind is served, waiting
// for it while it is not.
func (s *Scanner) waitForReportCRD(ctx context.Context) bool {
	logger := log.FromContext(ctx).WithName("background")
	logged := false
	for {
		_, err := s.discovery.ServerResourcesForGroupVersion(reportv1alpha2.GroupVersion.String())
		if err == nil {
			return true
		}
		if !logged {
			logger.Info("background scan is off: the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed; "+
				"install it with `kubectl apply -k config/policyreport` and the scan turns on within a minute", "reason", err.Error())
			logged = true
			if s.client != nil {
				// Without reports there are no current counters either.
				if err := s.clear(ctx, false); err != nil && ctx.Err() == nil {
					logger.Error(err, "remove the background scan's counters")
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Minute):
		}
	}
}

// resync scans every namespace now and each ResyncPeriod.
func (s *Scanner) resync(ctx context.Context) {
	for {
		var namespaces corev1.NamespaceList
		err := s.client.List(ctx, &namespaces)
		next := s.opts.ResyncPeriod
		if err != nil {
			log.FromContext(ctx).Error(err, "background scan: list namespaces; retrying in 10s")
			next = 10 * time.Second
		}
		s.mu.Lock()
		if s.initialPending == nil && err == nil {
			s.initialPending = map[string]bool{}
			for i := range namespaces.Items {
				s.initialPending[namespaces.Items[i].Name] = true
			}
		}
		s.mu.Unlock()
		for i := range namespaces.Items {
			s.queue.Add(namespaces.Items[i].Name)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// objectHandler queues the namespace of an object that was created,
// deleted, or changed in a way that can change its results: its pod spec
// (a controller's generation) or its labels.
func (s *Scanner) objectHandler() toolscache.ResourceEventHandler {
	queue := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(client.Object); ok {
			s.queue.AddAfter(o.GetNamespace(), s.opts.Batch)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { queue(obj) },
		DeleteFunc: queue,
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(client.Object), newObj.(client.Object)
			changed := o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetLabels(), n.GetLabels()) ||
				!reflect.DeepEqual(metav1.GetControllerOf(o), metav1.GetControllerOf(n))
			if op, ok := oldObj.(*corev1.Pod); ok {
				changed = changed || !apierrors.Semantic.DeepEqual(op.Spec, newObj.(*corev1.Pod).Spec)
			}
			if changed {
				queue(newObj)
			}
		},
	}
}

// work scans one queued namespace; it reports false when the queue shut down.
func (s *Scanner) work(ctx context.Context) bool {
	ns, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(ns)
	if err := s.scanNamespace(ctx, ns); err != nil {
		if ctx.Err() != nil {
			return false
		}
		s.queue.AddRateLimited(ns)
		log.FromContext(ctx).WithName("background").Error(err, "scan failed; retrying with backoff",
			"namespace", ns, "retries", s.queue.NumRequeues(ns))
		return true
	}
	s.queue.Forget(ns)
	return true
}

// ScanNamespace decides every scanned object of a namespace and writes the
// namespace's reports: created, updated when they changed, deleted when they
// hold nothing any more.
func (s *Scanner) scanNamespace(ctx context.Context, namespace string) error {
	start := time.Now()
	defer func() { scanDuration.Observe(time.Since(start).Seconds()) }()
	var ns corev1.Namespace
	if err := s.client.Get(ctx, client.ObjectKey{Name: namespace}, &ns); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("get Namespace: %w", err)
	} else if err != nil || ns.DeletionTimestamp != nil {
		// Gone or going: its reports go with it, and nothing in it counts.
		s.forget(namespace)
		return nil
	}
	snap := s.index.Snapshot()
	now := s.clock.Now()
	entries, stats, err := s.decide(ctx, snap, namespace, now)
	if err != nil {
		return err
	}
	policies := map[string]report.Policy{}
	for _, p := range snap.Policies() {
		policies[p.Name] = report.Policy{Name: p.Name, UID: types.UID(p.UID)}
	}
	want := report.Reports(namespace, entries, policies)
	var have reportv1alpha2.PolicyReportList
	if err := s.reports.List(ctx, &have, client.InNamespace(namespace), client.MatchingLabels{report.LabelManagedBy: report.ManagedBy}); err != nil {
		return fmt.Errorf("list PolicyReports: %w", err)
	}
	report.KeepTimestamps(want, have.Items)
	existing := map[string]*reportv1alpha2.PolicyReport{}
	for i := range have.Items {
		existing[have.Items[i].Name] = &have.Items[i]
	}
	var errs []error
	for _, r := range want {
		old := existing[r.Name]
		delete(existing, r.Name)
		if err := s.write(ctx, old, r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, old := range existing {
		if err := s.writes.Wait(ctx); err != nil {
			return err
		}
		if err := s.client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete PolicyReport %s/%s: %w", old.Namespace, old.Name, err))
		}
		reportWrites.WithLabelValues("delete").Inc()
	}
	s.mu.Lock()
	if len(stats.violations) == 0 && len(stats.matched) == 0 {
		delete(s.stats, namespace)
	} else {
		s.stats[namespace] = stats
	}
	delete(s.initialPending, namespace)
	s.mu.Unlock()
	return errors.Join(errs...)
}

// forget drops a namespace that no longer exists from the counters.
func (s *Scanner) forget(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stats, namespace)
	delete(s.initialPending, namespace)
}

// write creates or updates one report, unless it already says the same.
func (s *Scanner) write(ctx context.Context, old, r *reportv1alpha2.PolicyReport) error {
	if old != nil && apierrors.Semantic.DeepEqual(old.Summary, r.Summary) && apierrors.Semantic.DeepEqual(old.Results, r.Results) &&
		apierrors.Semantic.DeepEqual(old.OwnerReferences, r.OwnerReferences) && maps.Equal(old.Annotations, r.Annotations) {
		return nil
	}
	if err := s.writes.Wait(ctx); err != nil {
		return err
	}
	if old == nil {
		if err := s.client.Create(ctx, r); err != nil {
			return fmt.Errorf("create PolicyReport %s/%s: %w", r.Namespace, r.Name, err)
		}
		reportWrites.WithLabelValues("create").Inc()
		return nil
	}
	old.Labels, old.Annotations, old.OwnerReferences = r.Labels, r.Annotations, r.OwnerReferences
	old.Scope, old.ScopeSelector, old.Summary, old.Results = nil, nil, r.Summary, r.Results
	if err := s.client.Update(ctx, old); err != nil {
		return fmt.Errorf("update PolicyReport %s/%s: %w", r.Namespace, r.Name, err)
	}
	reportWrites.WithLabelValues("update").Inc()
	return nil
}

// decide evaluates every scanned object of a namespace.
func (s *Scanner) decide(ctx context.Context, snap *index.Snapshot, namespace string, now time.Time) ([]report.Entry, namespaceStats, error) {
	stats := namespaceStats{violations: map[string]int{}, matched: map[string]int{}}
	var entries []report.Entry
	labels := snap.NamespaceLabels(namespace)
	for _, k := range scannedKinds {
		list := k.list()
		if err := s.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, stats, fmt.Errorf("list %s: %w", k.gvk.Kind, err)
		}
		for _, obj := range k.items(list) {
			if k.topOnly && metav1.GetControllerOf(obj) != nil {
				continue
			}
			// The cache hands out copies, so defaulting the spec in place
			// (NewObject) leaves the cache alone.
			o, err := engine.NewObject(obj)
			if err != nil {
				return nil, stats, fmt.Errorf("%s %s/%s: %w", k.gvk.Kind, namespace, obj.GetName(), err)
			}
			o.APIVersion, o.Kind = k.gvk.GroupVersion().String(), k.gvk.Kind
			d := snap.DecideIn(o, labels, now, engine.Background)
			scannedObjects.Inc()
			if len(d.Results) == 0 {
				continue
			}
			ref := corev1.ObjectReference{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: namespace, Name: obj.GetName(), UID: obj.GetUID()}
			es := report.Entries(d, ref, now)
			used := map[string]bool{}
			for _, e := range es {
				stats.violations[e.Policy] += e.Violations
				for _, x := range e.Exceptions {
					used[x] = true
				}
			}
			for x := range used {
				stats.matched[x]++
				s.usage.applied(x, now)
			}
			entries = append(entries, es...)
		}
	}
	return entries, stats, nil
}

// totals sums the namespaces' counters.
func (s *Scanner) totals() (violations, matched map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	violations, matched = map[string]int{}, map[string]int{}
	for _, st := range s.stats {
		for k, v := range st.violations {
			violations[k] += v
		}
		for k, v := range st.matched {
			matched[k] += v
		}
	}
	return violations, matched
}
