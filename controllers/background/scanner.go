// Package background owns the background scan: a controller, on the leader
// only, keyed by namespace, that decides the pods and pod-bearing workloads
// that exist with the index and the engine the webhook uses, writes each
// namespace's results as PolicyReports and keeps the violations and
// matchedObjects counters in SecurityPolicy and PolicyException status.
//
// The reconcilers in package controllers keep the index; this package only
// reads it, and hears of its changes through index.OnChange. It must not
// import package controllers (which wires it) nor the webhooks.
package background

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/report"
)

// controllerName names the scan's controller, and so its work queue in the
// workqueue metrics (workqueue_depth{name="background_scan"}, documented in
// docs/background.md).
const controllerName = "background_scan"

// cacheSyncTimeout bounds how long the scan waits for its informers (every
// pod and workload of the cluster, started only on the leader once the scan
// turns on) to sync. controller-runtime's 2 minutes would stop the manager
// in a large cluster.
var cacheSyncTimeout = 10 * time.Minute

// Scanner is the background scan. It runs on the leader only: it decides
// the objects that exist, from the manager's cache, with the index and the
// engine the webhook uses (background mode: only policies and exceptions
// with background: true), writes a namespace's results as PolicyReports and
// keeps the counters in SecurityPolicy and PolicyException status.
//
// It is a controller keyed by namespace (reconcile.Request{Name:
// namespace}), with one worker and report writes rate-limited, so that a
// policy change in a large cluster does not compete with the webhook for
// more than one core or flood the API server. A namespace is scanned again
// when something that can change its results changes: the index (a policy,
// an exception, the namespace's labels) or one of its objects; and every
// namespace is scanned again each ResyncPeriod.
//
// Scanner is also the leader-only runnable that turns the controller on:
// not before the PolicyReport CRD is served and the index is ready, and
// never when the scan is disabled (see Start).
type Scanner struct {
	client client.Client
	// reports reads PolicyReports from the API server itself: caching
	// them would need the CRD before the manager starts, would hold other
	// tools' reports too, and would answer with reports older than the
	// scan's own last writes.
	reports   client.Reader
	cache     cache.Cache
	discovery discovery.DiscoveryInterface
	index     *index.Index
	clock     clock.PassiveClock
	opts      Options
	writes    *rate.Limiter
	// store is the report API the scan writes: chosen by Start among
	// those served (Options.ReportAPI); PolicyReports before that.
	store store
	// eventTokens bounds the events on violating objects (events.go).
	eventTokens *rate.Limiter
	// disagreementLogs bounds the cross-check's log lines (crosscheck.go).
	disagreementLogs *rate.Limiter
	// controller is the scan's controller, started by Start once the scan
	// can run; nil when the scan is disabled.
	controller controller.Controller

	// crdMissingLogged: Start said once that no report API is served.
	crdMissingLogged bool

	mu sync.Mutex
	// stats are the last scan's counters of each namespace.
	stats map[string]namespaceStats
	// initialPending are the namespaces of the first resync not scanned
	// yet; nil until it listed them.
	initialPending map[string]bool
	// round are the namespaces of the current full scan (from a resync's
	// list) not yet scanned without error; nil between full scans. When it
	// empties, lastCompleteScan is set. A resync during a round does not
	// start another, so that a full scan slower than ResyncPeriod still
	// completes.
	round map[string]bool
	// roundStart is when the current full scan started: once it completes,
	// every namespace's reports are at least as new as that.
	roundStart time.Time
	// lastComplete is the start of the last full scan that completed, and
	// activeSince when the scan turned on, for the Scanned condition
	// (health.go); zero before.
	lastComplete, activeSince time.Time
	// sent are the events on violating objects last sent, by namespace,
	// and eventsDeferred the namespaces whose last scan held some back.
	sent           map[string]map[eventKey]eventSent
	eventsDeferred map[string]bool
	// memos are each namespace's decisions from its last scan, and
	// staleSince and allStaleSince the generation of the last index
	// change that can affect a namespace's results, or every namespace's
	// (memo.go).
	memos map[string]*memo
	// scanning are the namespaces whose scan is under way (memo.go).
	scanning map[string]bool
	// compiledPolicies are the policies' compiled forms for the
	// cross-check (crosscheck.go), by name; only the scan's one worker
	// uses them.
	compiledPolicies map[string]*compiledPolicy
	staleSince       map[string]int64
	allStaleSince    int64
	// seen is the generation of the last change markStale classified.
	seen int64
}

// namespaceStats are what one namespace's scan found.
type namespaceStats struct {
	violations map[string]int               // uncovered violations, by policy
	matched    map[types.NamespacedName]int // objects an exception waived something of, by exception
}

var (
	_ reconcile.Reconciler           = &Scanner{}
	_ manager.LeaderElectionRunnable = &Scanner{}
)

// Setup registers the scan with mgr. ix is the index the controllers keep.
func Setup(mgr manager.Manager, ix *index.Index, opts Options) error {
	opts.Default()
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("background scan: %w", err)
	}
	s := newScanner(mgr.GetClient(), mgr.GetAPIReader(), dc, ix, opts)
	s.cache = mgr.GetCache()
	if !opts.Disabled {
		if s.controller, err = s.newController(mgr); err != nil {
			return fmt.Errorf("background scan: %w", err)
		}
	}
	return mgr.Add(s)
}

func newScanner(c client.Client, reports client.Reader, dc discovery.DiscoveryInterface, ix *index.Index, opts Options) *Scanner {
	opts.Default()
	s := &Scanner{
		client: c, reports: reports, discovery: dc, index: ix, clock: opts.Clock, opts: opts,
		store:       newStore(opts.ReportAPI, c, reports),
		writes:      rate.NewLimiter(rate.Limit(opts.WritesPerSecond), max(1, int(opts.WritesPerSecond))),
		eventTokens: rate.NewLimiter(rate.Limit(opts.EventsPerSecond), max(1, int(5*opts.EventsPerSecond))),
		// One disagreement logged a second, ten at once: each is a bug
		// report, and a tenant who finds one may repeat it.
		disagreementLogs: rate.NewLimiter(1, 10),
		stats:            map[string]namespaceStats{},
		sent:             map[string]map[eventKey]eventSent{},
		eventsDeferred:   map[string]bool{},
		memos:            map[string]*memo{},
		scanning:         map[string]bool{},
		compiledPolicies: map[string]*compiledPolicy{},
		staleSince:       map[string]int64{},
	}
	if ix != nil && !opts.Disabled {
		ix.OnChange(s.markStale)
		// No memo exists yet: changes before now need no classifying.
		s.mu.Lock()
		s.seen = max(s.seen, ix.Snapshot().Generation())
		s.mu.Unlock()
	}
	return s
}

// newController builds the scan's controller, not yet started: Start
// starts it. Its sources are the index's changes, the scanned kinds'
// informers and the periodic resync (sources.go).
func (s *Scanner) newController(mgr manager.Manager) (controller.Controller, error) {
	logger := mgr.GetLogger().WithName("background").WithValues("controller", controllerName)
	opts := controller.Options{
		Reconciler: s,
		// One namespace at a time: at most one core.
		MaxConcurrentReconciles: 1,
		// A namespace whose scan fails is retried with exponential backoff,
		// from 1s up to 5 minutes, so that a lasting error (RBAC, another
		// admission webhook refusing reports) costs little.
		RateLimiter:      workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 5*time.Minute),
		CacheSyncTimeout: cacheSyncTimeout,
		Logger:           logger,
		// The request names a namespace, not an object.
		LogConstructor: func(req *reconcile.Request) logr.Logger {
			if req == nil {
				return logger
			}
			return logger.WithValues("namespace", req.Name)
		},
	}
	opts.DefaultFromConfig(mgr.GetControllerOptions())
	c, err := controller.NewUnmanaged(controllerName, opts)
	if err != nil {
		return nil, err
	}
	watches := []source.Source{source.Func(s.watchIndex), source.Func(s.resync)}
	for _, k := range scannedKinds {
		watches = append(watches, source.Kind(mgr.GetCache(), k.object(), s.objectHandler()))
	}
	for _, w := range watches {
		if err := c.Watch(w); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// request is the work item of a namespace.
func request(namespace string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: namespace}}
}

// Reconcile scans the namespace the request names.
func (s *Scanner) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := s.scanNamespace(ctx, req.Name); err != nil {
		return reconcile.Result{}, err
	}
	s.mu.Lock()
	deferred := s.eventsDeferred[req.Name]
	delete(s.eventsDeferred, req.Name)
	s.mu.Unlock()
	if deferred {
		// Events held back by the rate limit go out at a rescan soon,
		// not at the next resync.
		return reconcile.Result{RequeueAfter: eventRetry}, nil
	}
	return reconcile.Result{}, nil
}

// scanNamespace decides every scanned object of a namespace and writes the
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
	defer s.startScan(namespace)()
	snap := s.index.Snapshot()
	now := s.clock.Now()
	entries, stats, found, err := s.decide(ctx, snap, namespace, now)
	if err != nil {
		return err
	}
	s.sendEvents(namespace, found, now)
	want := report.Reports(namespace, entries)
	have, err := s.store.list(ctx, namespace)
	if err != nil {
		return err
	}
	report.KeepTimestamps(want, have)
	existing := map[string]*reportv1alpha2.PolicyReport{}
	for i := range have {
		existing[have[i].Name] = &have[i]
	}
	var writes []func() error
	for _, r := range want {
		old := existing[r.Name]
		delete(existing, r.Name)
		writes = append(writes, func() error { return s.write(ctx, old, r) })
	}
	for _, old := range existing {
		writes = append(writes, func() error { return s.remove(ctx, old) })
	}
	errs := s.runWrites(ctx, writes)
	s.mu.Lock()
	if len(stats.violations) == 0 && len(stats.matched) == 0 {
		delete(s.stats, namespace)
	} else {
		s.stats[namespace] = stats
	}
	delete(s.initialPending, namespace)
	if len(errs) == 0 {
		// A namespace whose reports could not all be written keeps its
		// round open: its reports are not current.
		s.scannedInRound(namespace)
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

// forget drops a namespace that no longer exists from the counters.
func (s *Scanner) forget(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stats, namespace)
	delete(s.initialPending, namespace)
	delete(s.sent, namespace)
	delete(s.eventsDeferred, namespace)
	delete(s.memos, namespace)
	delete(s.staleSince, namespace)
	delete(s.scanning, namespace)
	s.scannedInRound(namespace)
}

// startRound starts a full scan of namespaces unless one is under way.
// Called with s.mu held.
func (s *Scanner) startRound(namespaces []string) {
	if s.round != nil {
		return
	}
	s.round = make(map[string]bool, len(namespaces))
	s.roundStart = s.clock.Now()
	for _, ns := range namespaces {
		s.round[ns] = true
	}
	s.completeRound()
}

// scannedInRound takes a namespace off the current full scan. Called with
// s.mu held.
func (s *Scanner) scannedInRound(namespace string) {
	if s.round == nil {
		return
	}
	delete(s.round, namespace)
	s.completeRound()
}

// completeRound ends the current full scan once every namespace of it has
// been scanned, and records when it started: a namespace scanned early in a
// long round is only as fresh as the round's start. Called with s.mu held.
func (s *Scanner) completeRound() {
	if len(s.round) > 0 {
		return
	}
	s.round = nil
	s.lastComplete = s.roundStart
	lastCompleteScan.Set(float64(s.roundStart.UnixNano()) / 1e9)
}

// writers is how many report writes of a namespace are in flight at once:
// an object has a report of its own, so a namespace of 500 pods may need 500
// writes, and one at a time they would take a round trip each; the rate
// limit (Options.WritesPerSecond) still bounds them all.
const writers = 32

// runWrites runs a namespace's report writes, at most writers at once, and
// returns their errors. It stops starting writes when ctx ends.
func (s *Scanner) runWrites(ctx context.Context, writes []func() error) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	slots := make(chan struct{}, writers)
	for _, w := range writes {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return append(errs, ctx.Err())
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := w(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// remove deletes a report that holds nothing any more: its object is gone
// (the garbage collector may have deleted it first), no rule matches it, or
// its results repeat its controller's.
func (s *Scanner) remove(ctx context.Context, old *reportv1alpha2.PolicyReport) error {
	if err := s.writes.Wait(ctx); err != nil {
		return err
	}
	if err := s.store.delete(ctx, old); err != nil {
		return err
	}
	reportWrites.WithLabelValues("delete").Inc()
	return nil
}

// write creates or updates one report, unless it already says the same.
func (s *Scanner) write(ctx context.Context, old, r *reportv1alpha2.PolicyReport) error {
	// podsieve's labels replace podsieve's; other tools' labels stay.
	labels := maps.Clone(r.Labels)
	if old != nil {
		for k, v := range old.Labels {
			if !report.OwnLabel(k) {
				labels[k] = v
			}
		}
	}
	if old != nil && apiequality.Semantic.DeepEqual(old.Summary, r.Summary) && apiequality.Semantic.DeepEqual(old.Results, r.Results) &&
		apiequality.Semantic.DeepEqual(old.OwnerReferences, r.OwnerReferences) && apiequality.Semantic.DeepEqual(old.Scope, r.Scope) &&
		maps.Equal(old.Labels, labels) {
		return nil
	}
	if err := s.writes.Wait(ctx); err != nil {
		return err
	}
	if old == nil {
		if err := s.store.create(ctx, r); err != nil {
			return err
		}
		reportWrites.WithLabelValues("create").Inc()
		return nil
	}
	old.Labels, old.OwnerReferences = labels, r.OwnerReferences
	old.Scope, old.ScopeSelector, old.Summary, old.Results = r.Scope, nil, r.Summary, r.Results
	if err := s.store.update(ctx, old); err != nil {
		return err
	}
	reportWrites.WithLabelValues("update").Inc()
	return nil
}

// totals sums the namespaces' counters.
func (s *Scanner) totals() (violations map[string]int, matched map[types.NamespacedName]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	violations, matched = map[string]int{}, map[types.NamespacedName]int{}
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
