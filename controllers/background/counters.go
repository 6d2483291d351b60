package background

import (
	"context"
	"errors"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/kube"
)

// flushCounters writes the scan's counters, once every namespace has been
// scanned since the scan started (before that they would undercount):
// violations on SecurityPolicies, matchedObjects on PolicyExceptions. Start
// runs it every StatusInterval.
func (s *Scanner) flushCounters(ctx context.Context) {
	if s.initialScanDone() {
		if err := s.writeCounters(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "write status counters")
		}
	}
	// The scan's health is written even while the first scan runs: that
	// it never completes is what it must be able to say.
	if err := s.writeHealth(ctx); err != nil && ctx.Err() == nil {
		log.FromContext(ctx).Error(err, "write the Scanned condition")
	}
}

// writeCounters applies the counters that changed (kube.PolicyScanCounters,
// kube.ExceptionScanCounters). Whether an object is
// counted at all (background: true) is what the compiled policy or
// exception in the index says.
func (s *Scanner) writeCounters(ctx context.Context) error {
	violations, matched := s.totals()
	snap := s.index.Snapshot()
	policies, exceptions, err := kube.ListPoliciesAndExceptions(ctx, s.client)
	if err != nil {
		return err
	}
	// Compare before applying: most counters do not change between two
	// flushes, and an apply copies the status first.
	for i := range policies.Items {
		sp := &policies.Items[i]
		var want *int32
		if p := snap.Policy(sp.Name); p != nil && p.Background {
			want = ptr.To(int32(violations[sp.Name]))
		}
		if ptr.Equal(sp.Status.Violations, want) {
			continue
		}
		status := sp.Status.DeepCopy()
		status.Violations = want
		if _, err := kube.PolicyScanCounters.Apply(ctx, s.client, sp, status); err != nil {
			return err
		}
	}
	for i := range exceptions.Items {
		pe := &exceptions.Items[i]
		var want *int32
		if countsInBackground(snap, pe) {
			want = ptr.To(int32(matched[client.ObjectKeyFromObject(pe)]))
		}
		if ptr.Equal(pe.Status.MatchedObjects, want) {
			continue
		}
		status := pe.Status.DeepCopy()
		status.MatchedObjects = want
		if _, err := kube.ExceptionScanCounters.Apply(ctx, s.client, pe, status); err != nil {
			return err
		}
	}
	return nil
}

// countsInBackground reports whether an exception has a matchedObjects
// counter: background: true, as compiled in the index, in force or not (an
// expired or refused one waives nothing, so its counter is 0). Only an
// exception the index does not hold (invalid, or beyond its namespace's
// limit) is read from its spec.
func countsInBackground(snap *index.Snapshot, pe *policyv1alpha1.PolicyException) bool {
	if e := snap.Held(pe.Namespace, pe.Name); e != nil && e.UID == string(pe.UID) {
		return e.Background
	}
	return pe.Spec.Background == nil || *pe.Spec.Background
}

// initialScanDone reports whether every namespace queued by the first
// resync has been scanned.
func (s *Scanner) initialScanDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialPending != nil && len(s.initialPending) == 0
}

// clear removes what earlier scans wrote, for a scan that is off: the
// violations and matchedObjects counters, the Scanned condition and, with
// reports, podsieve's PolicyReports. lastAppliedTime stays: admission keeps it current.
func (s *Scanner) clear(ctx context.Context, reports bool) error {
	policies, exceptions, err := kube.ListPoliciesAndExceptions(ctx, s.client)
	if err != nil {
		return err
	}
	// One object's failed write does not stop the others'.
	var errs []error
	for i := range policies.Items {
		sp := &policies.Items[i]
		if sp.Status.Violations != nil {
			status := sp.Status.DeepCopy()
			status.Violations = nil
			if _, err := kube.PolicyScanCounters.Apply(ctx, s.client, sp, status); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		errs = append(errs, s.writeScanned(ctx, sp, nil))
	}
	for i := range exceptions.Items {
		if pe := &exceptions.Items[i]; pe.Status.MatchedObjects != nil {
			status := pe.Status.DeepCopy()
			status.MatchedObjects = nil
			if _, err := kube.ExceptionScanCounters.Apply(ctx, s.client, pe, status); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if !reports {
		return errors.Join(errs...)
	}
	for _, api := range []ReportAPI{ReportAPIOpenReports, ReportAPIWGPolicy} {
		served, err := s.served(api)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if !served {
			continue // no CRD, no reports
		}
		if err := s.removeReports(ctx, newStore(api, s.client, s.reports)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeReports deletes every report podsieve wrote through st.
func (s *Scanner) removeReports(ctx context.Context, st store) error {
	have, err := st.list(ctx, "")
	if err != nil {
		return err
	}
	for i := range have {
		if err := st.delete(ctx, &have[i]); err != nil {
			return err
		}
	}
	return nil
}
