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
		Help: "Objects decided by the background scan.",
	})
	reportWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_background_report_writes_total",
		Help: "PolicyReport writes by the background scan, by operation (create, update, delete).",
	}, []string{"operation"})
)

func init() {
	metrics.Registry.MustRegister(scanDuration, scannedObjects, reportWrites)
}
