package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Admission metrics, registered with controller-runtime's registry and
// served on the manager's metrics endpoint.
var (
	admissionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_admission_requests_total",
		Help: "Admission reviews of pod-bearing objects answered, by kind, operation and decision (allow, deny, error).",
	}, []string{"kind", "operation", "decision"})
	admissionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "podsieve_admission_duration_seconds",
		Help:    "Time to answer an admission review of a pod-bearing object, from decoding to response.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25},
	})
	violations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_violations_total",
		Help: "Uncovered violations found at admission, by policy, rule, control and the policy's action.",
	}, []string{"policy", "rule", "control", "action"})
	exceptionsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_exceptions_applied_total",
		Help: "Admission reviews in which a PolicyException covered at least one violation, by exception.",
	}, []string{"namespace", "exception"})
)

func init() {
	metrics.Registry.MustRegister(admissionRequests, admissionDuration, violations, exceptionsApplied)
}
