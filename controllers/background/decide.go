package background

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/report"
)

// decide evaluates every scanned object of a namespace, and returns the
// report entries: every judged object's, except the results of a
// controlled pod that repeat its controller's (report.Differing), unless
// Options.ReportControlledPods.
func (s *Scanner) decide(ctx context.Context, snap *index.Snapshot, namespace string, now time.Time) ([]report.Entry, namespaceStats, []violation, error) {
	r := &namespaceRound{s: s, snap: snap, namespace: namespace, labels: snap.NamespaceLabels(namespace), now: now,
		stats:  namespaceStats{violations: map[string]int{}, matched: map[types.NamespacedName]int{}},
		judged: map[types.UID][]report.Entry{}}
	// The controllers first, so that a pod's results can be compared with
	// its controller's (owners.go).
	lists, err := s.listScanned(ctx, namespace)
	if err != nil {
		return nil, r.stats, nil, err
	}
	r.own = newOwners(lists)
	last := s.reusable(namespace, snap, now)
	r.next = &memo{validUntil: nextExpiry(snap, namespace, r.labels, now), decisions: map[types.UID]memoized{}}
	for _, i := range scanOrder() {
		k := scannedKinds[i]
		for _, obj := range lists[i] {
			if k.topOnly && r.own.repeatsParent(obj) {
				continue
			}
			m, reused := last.lookup(obj.GetUID(), obj.GetResourceVersion())
			if !reused {
				if m, err = r.decideObject(ctx, k, obj); err != nil {
					return nil, r.stats, nil, err
				}
			}
			r.add(k, obj, m, reused)
		}
	}
	s.remember(namespace, snap, r.next)
	return r.entries, r.stats, r.found, nil
}

// listScanned lists every scanned kind in namespace, in the order of
// scannedKinds.
func (s *Scanner) listScanned(ctx context.Context, namespace string) ([][]client.Object, error) {
	lists := make([][]client.Object, len(scannedKinds))
	for i, k := range scannedKinds {
		list := k.list()
		if err := s.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("list %s: %w", k.gvk.Kind, err)
		}
		lists[i] = k.items(list)
	}
	return lists, nil
}

// namespaceRound is one namespace's decide: what it reads, and what it adds
// up as it goes.
type namespaceRound struct {
	s         *Scanner
	snap      *index.Snapshot
	namespace string
	labels    map[string]string
	now       time.Time
	own       owners
	judged    map[types.UID][]report.Entry
	next      *memo
	// The cross-check's compiled policies, prepared at the first object
	// decided.
	check    *namespaceCheck
	prepared bool

	stats   namespaceStats
	entries []report.Entry
	found   []violation
}

// decideObject decides one object afresh (and cross-checks it, when on).
func (r *namespaceRound) decideObject(ctx context.Context, k scannedKind, obj client.Object) (memoized, error) {
	u, err := r.crossCheckInput(ctx, k, obj)
	if err != nil {
		return memoized{}, err
	}
	// The cache hands out copies, so defaulting the spec in place
	// (NewObject) leaves the cache alone.
	o, err := engine.NewObject(obj)
	if err != nil {
		return memoized{}, fmt.Errorf("%s %s/%s: %w", k.gvk.Kind, r.namespace, obj.GetName(), err)
	}
	o.APIVersion, o.Kind = k.gvk.GroupVersion().String(), k.gvk.Kind
	d := r.snap.DecideIn(o, r.labels, r.now, engine.Background)
	decidedObjects.Inc()
	if u != nil {
		r.s.crossCheck(ctx, r.check, u, k.gvk, o, r.snap, r.labels, r.now)
	}
	ref := corev1.ObjectReference{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: r.namespace, Name: obj.GetName(), UID: obj.GetUID()}
	return outputsOf(obj, d, ref, r.now), nil
}

// crossCheckInput is obj as the API server stored it, before NewObject
// defaults it, for the cross-check; nil when there is nothing to compare
// it with. It prepares the namespace's compiled policies at the first
// object.
func (r *namespaceRound) crossCheckInput(ctx context.Context, k scannedKind, obj client.Object) (*unstructured.Unstructured, error) {
	if r.s.opts.CrossCheck && !r.prepared {
		// A diagnostic: its failure leaves the scan's own work alone.
		var err error
		if r.check, err = r.s.namespaceCheck(ctx, r.snap, r.namespace, r.labels, r.now); err != nil {
			log.FromContext(ctx).Error(err, "cross-check: prepare the namespace's compiled policies; its objects are not compared in this scan")
			r.check = nil
		}
		r.prepared = true
	}
	if r.check == nil || len(r.check.hooks) == 0 {
		return nil, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", k.gvk.Kind, r.namespace, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(k.gvk)
	return u, nil
}

// add counts one object's outputs: its report entries (less what repeats
// its controller's), the violations, the exceptions that waived something
// and the events. reused says they were decided at an earlier scan.
func (r *namespaceRound) add(k scannedKind, obj client.Object, m memoized, reused bool) {
	r.next.decisions[obj.GetUID()] = m
	scannedObjects.Inc()
	if k.topOnly {
		r.judged[obj.GetUID()] = nil
	}
	if len(m.entries) == 0 {
		return
	}
	es := m.entries
	if reused {
		// As a fresh decision would, the results carry this scan's time
		// (KeepTimestamps keeps a report's older one where it holds the
		// same result).
		es = report.Stamped(es, r.now)
	}
	if k.topOnly {
		r.judged[obj.GetUID()] = es
	} else if c, ok := r.own.judgedController(obj, r.judged); ok && !r.s.opts.ReportControlledPods {
		es = report.Differing(es, c)
	}
	for _, e := range es {
		r.stats.violations[e.Policy] += e.Violations
	}
	for _, src := range m.applied {
		if src.IsException() {
			r.stats.matched[types.NamespacedName{Namespace: src.Namespace, Name: src.Name}]++
		}
	}
	if len(m.applied) > 0 && r.s.opts.ExceptionsApplied != nil {
		r.s.opts.ExceptionsApplied(m.applied, r.now)
	}
	r.entries = append(r.entries, es...)
	for _, v := range m.events {
		v.obj = obj
		r.found = append(r.found, v)
	}
}
