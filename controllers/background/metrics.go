package background

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	scanDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "podsieve_background_scan_duration_seconds",
		Help:    "Time to scan one namespace in the background: decide its objects and write its PolicyReports.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
	})
	scannedObjects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "podsieve_background_objects_scanned_total",
		Help: "Objects the background scan judged: decided with the engine, or their decision reused (podsieve_background_objects_decided_total counts the first).",
	})
	decidedObjects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "podsieve_background_objects_decided_total",
		Help: "Objects the background scan decided with the engine; an object version already decided, with nothing it depends on changed since, is counted only in podsieve_background_objects_scanned_total.",
	})
	crossChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_background_crosscheck_total",
		Help: "Objects the background scan decided both with the engine and with the API server's form of a SecurityPolicy (the ValidatingAdmissionPolicy podsieve compiles from it, evaluated in process), by policy and result: agree; disagree, a bug in one of the two (each is logged with the object and rules); not_compared, where the compiled form deliberately decides otherwise (an object over its size bounds, an evaluation error such as its cost budget, parameters pending or over their size limit) or the engine stopped at its work budget.",
	}, []string{"policy", "result"})
	reportWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_background_report_writes_total",
		Help: "PolicyReport writes by the background scan, by operation (create, update, delete).",
	}, []string{"operation"})
	// lastCompleteScan and scanActive are what an alert on a stalled scan
	// needs: the scan runs on the leader only, and only when it is enabled
	// and the PolicyReport CRD is installed, so the age of the last
	// complete scan means something only where scanActive is 1.
	lastCompleteScan = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podsieve_background_last_complete_scan_timestamp_seconds",
		Help: "When the last complete full background scan started, in seconds since the epoch: every namespace listed by that resync has since been scanned and its PolicyReports written without error, so every report is at least this new. 0 until the first completes on this replica.",
	})
	eventsSent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "podsieve_background_events_total",
		Help: "Warning events (reason PolicyViolation) the background scan sent on violating objects.",
	})
	eventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "podsieve_background_events_deferred_total",
		Help: "Events on violating objects not sent because the rate limit was reached; each is tried again at a later scan.",
	})
	reportAPI = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "podsieve_background_report_api",
		Help: "1 for the report API the background scan writes (api: openreports or wgpolicyk8s), or for api=\"none\" while none it may write is served; 0 for the others.",
	}, []string{"api"})
	scanActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podsieve_background_scan_active",
		Help: "1 while this replica runs the background scan (the leader, with the scan enabled and the PolicyReport CRD installed), 0 otherwise.",
	})
)

func init() {
	metrics.Registry.MustRegister(scanDuration, scannedObjects, decidedObjects, crossChecks, reportWrites, lastCompleteScan, scanActive, eventsSent, eventsDropped, reportAPI)
}

// setReportAPI marks the report API the scan writes; "" for none.
func setReportAPI(api ReportAPI) {
	if api == "" {
		api = "none"
	}
	for _, a := range []ReportAPI{ReportAPIOpenReports, ReportAPIWGPolicy, "none"} {
		v := 0.0
		if a == api {
			v = 1
		}
		reportAPI.WithLabelValues(string(a)).Set(v)
	}
}
