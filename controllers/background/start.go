package background

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// crdRecheck is how often a scan without the PolicyReport CRD looks
	// for it again ("turns on within a minute", docs/background.md).
	crdRecheck = time.Minute
	// indexRecheck is how often a scan waits to see the index ready.
	indexRecheck = 100 * time.Millisecond
)

// NeedLeaderElection reports true: only the leader scans and writes reports.
func (s *Scanner) NeedLeaderElection() bool { return true }

// Start runs the scan on the leader until ctx ends. Disabled, it removes
// what an earlier scan wrote and stops. It writes to the report API that
// Options.ReportAPI names, or under auto to OpenReports when served, else
// to PolicyReports; with neither served there is nowhere to write results:
// the scan stays off, says so, and turns on when a CRD appears. It starts
// the controller, and so the informers of every pod and workload, only
// then, and only once the index is ready.
func (s *Scanner) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("background")
	ctx = log.IntoContext(ctx, logger)
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
	// From here on the scan is meant to run: its health is written even
	// while it waits for a report API, the index or its informers, so that
	// a scan that never gets going is reported stalled, not left looking
	// healthy under a predecessor's condition. The counters wait for the
	// first full scan (flushCounters).
	s.mu.Lock()
	s.activeSince = s.clock.Now()
	s.mu.Unlock()
	go wait.UntilWithContext(ctx, s.flushCounters, s.opts.StatusInterval)
	if wait.PollUntilContextCancel(ctx, crdRecheck, true, s.reportAPIServed) != nil {
		return nil // stopped before the CRD appeared
	}
	s.replaceOtherAPI(ctx)
	if wait.PollUntilContextCancel(ctx, indexRecheck, true, func(context.Context) (bool, error) { return s.index.Ready(), nil }) != nil {
		return nil
	}
	// Wait for the informers of every scanned kind here, without a
	// deadline, before the controller starts: its own wait gives up after
	// cacheSyncTimeout and returns an error, and an error from a runnable
	// stops the manager, webhook included. A kind that never syncs (a
	// permission missing) leaves the scan off, not admission down.
	for _, k := range scannedKinds {
		if _, err := s.cache.GetInformer(ctx, k.object()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			logger.Error(err, "background scan stays off: cannot watch a scanned kind", "kind", k.gvk.Kind)
			<-ctx.Done()
			return nil
		}
	}
	logger.Info("background scan is on", "resyncPeriod", s.opts.ResyncPeriod, "reportAPI", s.store.api().groupVersion())
	scanActive.Set(1)
	defer scanActive.Set(0)
	if err := s.controller.Start(ctx); err != nil && ctx.Err() == nil {
		// Only the scan fails: say so and leave the manager, and so
		// admission, running.
		logger.Error(err, "background scan stopped")
		<-ctx.Done()
	}
	return nil
}

// reportAPIServed picks the report API to write: the one Options.ReportAPI
// names, or under auto OpenReports, then PolicyReports. When none is
// served it says so the first time, with how to install one, and removes
// the counters, which are not current without reports.
func (s *Scanner) reportAPIServed(ctx context.Context) (bool, error) {
	candidates := []ReportAPI{s.opts.ReportAPI}
	if s.opts.ReportAPI == ReportAPIAuto {
		candidates = []ReportAPI{ReportAPIOpenReports, ReportAPIWGPolicy}
	}
	var served []ReportAPI
	for _, api := range candidates {
		ok, err := s.served(api)
		if err != nil {
			// Not an answer: choosing another API on a passing discovery
			// error would move every report. Ask again at the next poll.
			log.FromContext(ctx).Error(err, "cannot tell whether a report API is served; asking again in a minute", "api", api)
			return false, nil
		}
		if ok {
			served = append(served, api)
		}
	}
	if len(served) > 0 {
		api, err := s.stay(ctx, served)
		if err != nil {
			log.FromContext(ctx).Error(err, "cannot tell which report API holds podsieve's reports; asking again in a minute")
			return false, nil
		}
		s.store = newStore(api, s.client, s.reports)
		setReportAPI(api)
		return true, nil
	}
	setReportAPI("")
	if !s.crdMissingLogged {
		s.crdMissingLogged = true
		logger := log.FromContext(ctx)
		logger.Info("background scan is off: no report API it may write is served (--report-api=" + string(s.opts.ReportAPI) + "); " +
			"install the PolicyReport CRD with `kubectl apply -k config/policyreport`, or the OpenReports CRDs, and the scan turns on within a minute")
		if err := s.clear(ctx, false); err != nil && ctx.Err() == nil {
			logger.Error(err, "remove the background scan's counters")
		}
	}
	return false, nil
}

// replaceOtherAPI removes the reports an earlier scan wrote to the API not
// written now, when --report-api names one explicitly: they would stay,
// stale. Under auto the scan stays where its reports are (stay), so there
// is nothing to remove, and a passing discovery error never removes
// anything.
func (s *Scanner) replaceOtherAPI(ctx context.Context) {
	if s.opts.ReportAPI == ReportAPIAuto {
		return
	}
	for _, other := range []ReportAPI{ReportAPIOpenReports, ReportAPIWGPolicy} {
		if other == s.store.api() {
			continue
		}
		if served, err := s.served(other); err != nil || !served {
			continue
		}
		if err := s.removeReports(ctx, newStore(other, s.client, s.reports)); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "remove the reports an earlier scan wrote to the other report API", "api", other)
		}
	}
}

// stay picks among the served APIs, in order of preference, the first that
// already holds podsieve's reports, else the first: under auto, an upgrade,
// or another tool installing the OpenReports CRDs, does not move reports
// that Policy Reporter or a dashboard already reads from one API.
func (s *Scanner) stay(ctx context.Context, served []ReportAPI) (ReportAPI, error) {
	if len(served) == 1 {
		return served[0], nil
	}
	for _, api := range served {
		has, err := newStore(api, s.client, s.reports).holdsAny(ctx)
		if err != nil {
			return "", err
		}
		if has {
			return api, nil
		}
	}
	return served[0], nil
}

// served reports whether the API server serves api's reports; an error when
// discovery could not tell.
func (s *Scanner) served(api ReportAPI) (bool, error) {
	_, err := s.discovery.ServerResourcesForGroupVersion(api.groupVersion())
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}
