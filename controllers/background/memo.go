package background

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/report"
)

// The scan decides each object version once. A namespace is scanned again
// for many reasons that change nothing about most of its objects: a resync,
// one of its other objects changing, an event retry. So each namespace keeps
// the decisions of its last scan, by object UID and resourceVersion, and
// reuses one while nothing it depends on has changed:
//
//   - the object: a new resourceVersion is a new version;
//   - the index: a change to it marks the namespaces whose results it can
//     affect as stale from that change's snapshot generation on (markStale),
//     and a decision made from an older snapshot is not reused there;
//   - the clock: a decision is reused only until the first expiry, after it
//     was made, of an exception in force that reaches the namespace (the
//     only way the engine's decision depends on the time).
//
// A decision is made within the engine's work budget, so the scan pays that
// bounded cost once per object version, not once per scan. The memo holds
// what a decision gave (report entries, events, exceptions used) per object
// the manager's cache holds, and is replaced by each scan: objects gone
// from a namespace leave it with the next scan.

// memo is a namespace's decisions from its last scan.
type memo struct {
	// generation is the index snapshot the decisions were made from.
	generation int64
	// validUntil is the first expiry after the scan of an exception in
	// force that reaches the namespace; zero when none expires.
	validUntil time.Time
	decisions  map[types.UID]memoized
}

// memoized is what one object version's decision gives the scan: its
// report entries, its events (without the object, which each scan sets) and
// the exceptions it used. Not the decision itself, which holds the object
// it was made on: kept for every object, that would be a second copy of
// every pod spec the cache holds.
type memoized struct {
	resourceVersion string
	entries         []report.Entry
	events          []violation
	applied         []engine.Source
}

// outputsOf is what the scan keeps of a decision on obj.
func outputsOf(obj client.Object, d engine.Decision, ref corev1.ObjectReference, now time.Time) memoized {
	m := memoized{resourceVersion: obj.GetResourceVersion(), applied: d.Applied()}
	if len(d.Results) > 0 {
		m.entries = report.Entries(d, ref, now)
	}
	for _, v := range violationsOf(obj, d) {
		v.obj = nil
		m.events = append(m.events, v)
	}
	return m
}

// reusable returns the namespace's memo if its decisions still hold for
// snapshot snap at now, nil otherwise.
func (s *Scanner) reusable(namespace string, snap *index.Snapshot, now time.Time) *memo {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.memos[namespace]
	switch {
	case m == nil:
		return nil
	case snap.Generation() > s.seen:
		// A change published but not yet classified by markStale.
		return nil
	case m.generation > snap.Generation():
		// Made from a newer snapshot than this scan's (a scan that
		// started earlier and ended later): not this scan's to reuse.
		return nil
	case m.generation < max(s.staleSince[namespace], s.allStaleSince):
		return nil
	case !m.validUntil.IsZero() && !now.Before(m.validUntil):
		return nil
	}
	return m
}

// lookup returns what the decision of an object version gave.
func (m *memo) lookup(uid types.UID, resourceVersion string) (memoized, bool) {
	if m == nil {
		return memoized{}, false
	}
	d, ok := m.decisions[uid]
	if !ok || d.resourceVersion != resourceVersion || resourceVersion == "" {
		return memoized{}, false
	}
	return d, true
}

// remember keeps a namespace's decisions from a scan made from snapshot
// snap, unless the index changed what they depend on while it ran.
func (s *Scanner) remember(namespace string, snap *index.Snapshot, m *memo) {
	m.generation = snap.Generation()
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.generation < max(s.staleSince[namespace], s.allStaleSince) {
		delete(s.memos, namespace)
		delete(s.staleSince, namespace)
		return
	}
	s.memos[namespace] = m
}

// markStale records, for each change to the index, from which generation
// on a namespace holds stale decisions: the namespace of a changed
// exception or of changed labels, and every namespace for anything else (a
// policy change, which only an admin makes, and a change of a cluster
// exception, which may reach any namespace). It is the scanner's own index
// listener, registered with the scanner whenever the scan is enabled, so
// that no decision made before a change is reused after it; seen says
// which changes it has classified. A namespace with no memo and no scan
// under way has nothing to mark: only those are recorded, so that the
// record stays as small as the memos (on a replica that does not scan,
// empty). It runs under the index's writer lock: it only writes a field.
func (s *Scanner) markStale(c index.Change) {
	gen := c.New.Generation()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = max(s.seen, gen)
	mark := func(namespace string) {
		if s.memos[namespace] != nil || s.scanning[namespace] {
			s.staleSince[namespace] = gen
		}
	}
	switch {
	case c.Kind == index.ChangedNamespace:
		mark(c.Name)
	case c.Kind == index.ChangedException && c.Namespace != s.opts.ExceptionsNamespace:
		mark(c.Namespace)
	default:
		s.allStaleSince = gen
	}
}

// startScan records that a scan of the namespace is under way, before it
// takes its snapshot, so that markStale records the changes published
// meanwhile; the returned func ends it.
func (s *Scanner) startScan(namespace string) func() {
	s.mu.Lock()
	s.scanning[namespace] = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.scanning, namespace)
		s.mu.Unlock()
	}
}

// nextExpiry is the first expiry after now of an exception that reaches
// the namespace, in force (it stops waiving) or not (its refusal's reason
// becomes "expired"); zero when none of them expires.
func nextExpiry(snap *index.Snapshot, namespace string, labels map[string]string, now time.Time) time.Time {
	var next time.Time
	for _, e := range append(snap.InForce(namespace, labels), snap.Inactive(namespace, labels)...) {
		at := e.ExpiresAt
		if at != nil && at.After(now) && (next.IsZero() || at.Before(next)) {
			next = *at
		}
	}
	return next
}
