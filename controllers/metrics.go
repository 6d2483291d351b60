package controllers

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/podsieve/podsieve/internal/index"
)

// metricsIndex is the index the gauges read: the one Setup built.
var metricsIndex atomic.Pointer[index.Index]

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
	metrics.Registry.MustRegister(
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
