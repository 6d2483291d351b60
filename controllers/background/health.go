package background

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/kube"
)

// Scan health: the Scanned condition on each SecurityPolicy the scan
// reports on, so that "the scan stalled" shows in kubectl get secpol and
// can be alerted on from kube-state-metrics, besides the metric
// podsieve_background_last_complete_scan_timestamp_seconds.

// stallAfter is how long without a complete full scan makes the scan
// stalled: two resync periods (a round may start just after one resync
// and run into the next) and ten minutes for the writes.
func (s *Scanner) stallAfter() time.Duration { return 2*s.opts.ResyncPeriod + 10*time.Minute }

// scanHealth says what the Scanned condition should say now: nil when
// there is nothing to say yet (the first full scan on this leader is under
// way, and not overdue).
func (s *Scanner) scanHealth(now time.Time) *metav1.Condition {
	s.mu.Lock()
	last, since := s.lastComplete, s.activeSince
	s.mu.Unlock()
	switch {
	case !last.IsZero() && now.Sub(last) <= s.stallAfter():
		return &metav1.Condition{Type: policyv1alpha1.ConditionScanned, Status: metav1.ConditionTrue, Reason: policyv1alpha1.ReasonScanComplete,
			Message: fmt.Sprintf("the last full background scan started at %s and completed: every namespace's reports are at least that new",
				last.UTC().Format(time.RFC3339))}
	case !last.IsZero():
		return &metav1.Condition{Type: policyv1alpha1.ConditionScanned, Status: metav1.ConditionFalse, Reason: policyv1alpha1.ReasonScanStalled,
			Message: fmt.Sprintf("no full background scan has completed since the one that started at %s, more than %s ago: reports may be stale; "+
				"see the leader's log (background scan) and its metric podsieve_background_last_complete_scan_timestamp_seconds", last.UTC().Format(time.RFC3339), s.stallAfter())}
	case !since.IsZero() && now.Sub(since) > s.stallAfter():
		return &metav1.Condition{Type: policyv1alpha1.ConditionScanned, Status: metav1.ConditionFalse, Reason: policyv1alpha1.ReasonScanStalled,
			Message: fmt.Sprintf("the background scan started at %s on this leader and has not completed a full scan in %s: reports may be stale; "+
				"see the leader's log (background scan) and workqueue_depth{name=%q}", since.UTC().Format(time.RFC3339), s.stallAfter(), controllerName)}
	}
	return nil
}

// writeScanned sets the Scanned condition of one SecurityPolicy to want,
// or removes it (want nil), when it says something else. It sets only that
// condition, by server-side apply (kube.PolicyScanHealth): the other
// writers' conditions are untouched, and theirs cannot write an older
// Scanned back.
func (s *Scanner) writeScanned(ctx context.Context, sp *policyv1alpha1.SecurityPolicy, want *metav1.Condition) error {
	return kube.ApplyPolicyCondition(ctx, s.client, sp, kube.PolicyScanHealth, policyv1alpha1.ConditionScanned, want, s.clock.Now())
}

// writeHealth brings every SecurityPolicy's Scanned condition up to date:
// the scan's health on each policy in force with background: true, none on
// the others. While the first full scan on this leader is under way and
// not overdue, a condition an earlier leader wrote stays as it is.
func (s *Scanner) writeHealth(ctx context.Context) error {
	health := s.scanHealth(s.clock.Now())
	snap := s.index.Snapshot()
	var policies policyv1alpha1.SecurityPolicyList
	if err := s.client.List(ctx, &policies); err != nil {
		return fmt.Errorf("list SecurityPolicies: %w", err)
	}
	// One policy's failed write (a stale copy's patch test) does not stop
	// the others'; it is retried at the next flush.
	var errs []error
	for i := range policies.Items {
		sp := &policies.Items[i]
		p := snap.Policy(sp.Name)
		switch {
		case p == nil || !p.Background:
			errs = append(errs, s.writeScanned(ctx, sp, nil))
		case health != nil:
			c := *health
			c.ObservedGeneration = p.Generation
			errs = append(errs, s.writeScanned(ctx, sp, &c))
		}
	}
	return errors.Join(errs...)
}
