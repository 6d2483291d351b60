package controllers

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/podsieve/podsieve/internal/index"
)

// metricsIndex is the index the gauges read: the one Setup built.
var metricsIndex atomic.Pointer[index.Index]

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
	objects := func(kind string, count func(*index.Snapshot) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "podsieve_index_objects",
			Help:        "Objects in the index that admission decides from, by kind: SecurityPolicies in force, Ready PolicyExceptions, Namespaces.",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 {
			if ix := metricsIndex.Load(); ix != nil {
				return float64(count(ix.Snapshot()))
			}
			return 0
		})
	}
	metrics.Registry.MustRegister(scanDuration, scannedObjects, reportWrites,
		objects("SecurityPolicy", func(s *index.Snapshot) int { return len(s.Policies()) }),
		objects("PolicyException", (*index.Snapshot).ExceptionCount),
		objects("Namespace", (*index.Snapshot).NamespaceCount),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsieve_index_generation",
			Help: "Changes published to the index since the manager started; it moves with every policy, exception or namespace change.",
		}, func() float64 {
			if ix := metricsIndex.Load(); ix != nil {
				return float64(ix.Snapshot().Generation())
			}
			return 0
		}),
	)
}
