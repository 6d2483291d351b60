package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/report"
)

// lastAppliedGranularity is how much later an exception must have been
// applied than its status says before status.lastAppliedTime is written
// again: an exception in use would otherwise be written on every scan.
const lastAppliedGranularity = time.Minute

// ExceptionUsage remembers when each exception last waived a violation, at
// admission (on every replica) and in the background scan (on the leader),
// until a flusher writes it to status.lastAppliedTime. Recording is a map
// write; nothing is written to the API server on the request path.
type ExceptionUsage struct {
	mu   sync.Mutex
	last map[string]time.Time // by namespace/name
}

// NewExceptionUsage returns an empty record.
func NewExceptionUsage() *ExceptionUsage {
	return &ExceptionUsage{last: map[string]time.Time{}}
}

// Applied records that the exceptions named by sources waived a violation
// at t.
func (u *ExceptionUsage) Applied(sources []engine.Source, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, src := range sources {
		if src.IsException() {
			u.record(src.NamespacedName(), t)
		}
	}
}

// applied records one exception by namespace/name (and takes back a time
// that could not be written, unless a newer one was recorded meanwhile).
func (u *ExceptionUsage) applied(key string, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.record(key, t)
}

func (u *ExceptionUsage) record(key string, t time.Time) {
	if t.After(u.last[key]) {
		u.last[key] = t
	}
}

// take returns what was recorded and forgets it.
func (u *ExceptionUsage) take() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.last
	u.last = map[string]time.Time{}
	return out
}

// usageFlusher writes status.lastAppliedTime from a replica's record every
// interval. It runs on every replica: each replica's webhook sees its own
// share of the requests.
type usageFlusher struct {
	client   client.Client
	usage    *ExceptionUsage
	interval time.Duration
}

func (f *usageFlusher) NeedLeaderElection() bool { return false }

func (f *usageFlusher) Start(ctx context.Context) error {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			f.flush(ctx)
		}
	}
}

func (f *usageFlusher) flush(ctx context.Context) {
	for key, at := range f.usage.take() {
		ns, name, _ := strings.Cut(key, "/")
		var pe policyv1alpha1.PolicyException
		if err := f.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pe); err != nil {
			if client.IgnoreNotFound(err) != nil {
				f.usage.applied(key, at) // tried again next flush
			}
			continue
		}
		orig := pe.DeepCopy()
		if setLastApplied(&pe.Status, at); equality.Semantic.DeepEqual(orig.Status, pe.Status) {
			continue
		}
		// Every replica writes this field: the optimistic lock keeps one
		// whose cache is behind from moving it back. On a conflict the
		// time is kept and tried again, against a fresher copy, next flush.
		err := f.client.Status().Patch(ctx, &pe, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			f.usage.applied(key, at) // tried again next flush
		default:
			log.FromContext(ctx).Error(err, "write lastAppliedTime", "exception", key)
			f.usage.applied(key, at) // tried again next flush
		}
	}
}

// setLastApplied moves status.lastAppliedTime to at when at is a
// granularity later than it; never back.
func setLastApplied(st *policyv1alpha1.PolicyExceptionStatus, at time.Time) {
	if st.LastAppliedTime == nil || at.Sub(st.LastAppliedTime.Time) >= lastAppliedGranularity {
		t := metav1.NewTime(at.Truncate(time.Second))
		st.LastAppliedTime = &t
	}
}

// flushStatus writes the scan's counters every StatusInterval, once every
// namespace has been scanned since the scan started (before that they would
// undercount): violations on SecurityPolicies, matchedObjects on
// PolicyExceptions. Only what changed is patched.
func (s *Scanner) flushStatus(ctx context.Context) {
	t := time.NewTicker(s.opts.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.initialScanDone() {
			continue
		}
		if err := s.writeCounters(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).WithName("background").Error(err, "write status counters")
		}
	}
}

func (s *Scanner) writeCounters(ctx context.Context) error {
	violations, matched := s.totals()
	snap := s.index.Snapshot()
	policies, exceptions, err := listPoliciesAndExceptions(ctx, s.client)
	if err != nil {
		return err
	}
	// Compare before patching: most counters do not change between two
	// flushes, and a patch copies the object first.
	for i := range policies.Items {
		sp := &policies.Items[i]
		var want *int32
		if p := snap.Policy(sp.Name); p != nil && p.Background {
			want = ptr.To(int32(violations[sp.Name]))
		}
		if ptr.Equal(sp.Status.Violations, want) {
			continue
		}
		if _, err := patchStatus(ctx, s.client, sp, func() { sp.Status.Violations = want }); err != nil {
			return err
		}
	}
	for i := range exceptions.Items {
		pe := &exceptions.Items[i]
		var want *int32
		if pe.Spec.Background == nil || *pe.Spec.Background {
			want = ptr.To(int32(matched[pe.Namespace+"/"+pe.Name]))
		}
		if ptr.Equal(pe.Status.MatchedObjects, want) {
			continue
		}
		if _, err := patchStatus(ctx, s.client, pe, func() { pe.Status.MatchedObjects = want }); err != nil {
			return err
		}
	}
	return nil
}

// initialScanDone reports whether every namespace queued by the first
// resync has been scanned.
func (s *Scanner) initialScanDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialPending != nil && len(s.initialPending) == 0
}

// clear removes what earlier scans wrote, for a scan that is off: the
// violations and matchedObjects counters and, with reports, podsieve's
// PolicyReports. lastAppliedTime stays: admission keeps it current.
func (s *Scanner) clear(ctx context.Context, reports bool) error {
	policies, exceptions, err := listPoliciesAndExceptions(ctx, s.client)
	if err != nil {
		return err
	}
	for i := range policies.Items {
		if sp := &policies.Items[i]; sp.Status.Violations != nil {
			if _, err := patchStatus(ctx, s.client, sp, func() { sp.Status.Violations = nil }); err != nil {
				return err
			}
		}
	}
	for i := range exceptions.Items {
		if pe := &exceptions.Items[i]; pe.Status.MatchedObjects != nil {
			if _, err := patchStatus(ctx, s.client, pe, func() { pe.Status.MatchedObjects = nil }); err != nil {
				return err
			}
		}
	}
	if !reports {
		return nil
	}
	if _, err := s.discovery.ServerResourcesForGroupVersion(reportv1alpha2.GroupVersion.String()); err != nil {
		return nil // no CRD, no reports
	}
	var list reportv1alpha2.PolicyReportList
	if err := s.reports.List(ctx, &list, client.MatchingLabels{report.LabelManagedBy: report.ManagedBy}); err != nil {
		return fmt.Errorf("list PolicyReports: %w", err)
	}
	for i := range list.Items {
		if err := s.client.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete PolicyReport %s/%s: %w", list.Items[i].Namespace, list.Items[i].Name, err)
		}
	}
	return nil
}
