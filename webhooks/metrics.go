package webhooks

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Admission metrics, registered with controller-runtime's registry and
// served on the manager's metrics endpoint. Every label is bounded by
// something a cluster admin controls (kinds, operations, policies, rules,
// namespaces) or by a cap; none grows with what a namespace editor writes.
var (
	admissionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_admission_requests_total",
		Help: "Admission reviews of pod-bearing objects answered, by kind, operation and decision (allow, deny, error).",
	}, []string{"kind", "operation", "decision"})
	admissionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "podsieve_admission_duration_seconds",
		Help: "Time to answer an admission review of a pod-bearing object, from decoding to response, by decision (allow, deny, error).",
		// Up to 10 s (--max-review-time's default): the alert on latency
		// near the API server's timeout (timeoutSeconds: 5) needs buckets
		// there, not only where healthy decisions fall.
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"decision"})
	violations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_violations_total",
		Help: "Uncovered violations found at admission, by policy, rule, control and the policy's action.",
	}, []string{"policy", "rule", "control", "action"})
	exceptionsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsieve_exceptions_applied_total",
		Help: "Admission reviews in which a PolicyException covered at least one violation, by namespace " +
			"(and by exception with --metrics-exception-label; empty otherwise).",
	}, []string{"namespace", "exception"})
	rejectedOverload = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "podsieve_admission_rejected_overload_total",
		Help: "Admission reviews refused without evaluation because no evaluation slot freed in time (--max-concurrent-reviews, --review-queue-timeout).",
	})
	admissionInflight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podsieve_admission_inflight",
		Help: "Admission reviews being evaluated now (at most --max-concurrent-reviews).",
	})
	unknownFields = &unknownFieldCounter{max: maxUnknownFieldSeries, seen: map[[2]string]bool{},
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podsieve_unknown_fields_total",
			Help: "Fields of admitted objects that this build of podsieve does not know (dropped when decoding), by kind and field path with list indices as [*].",
		}, []string{"kind", "field"})}
)

func init() {
	metrics.Registry.MustRegister(admissionRequests, admissionDuration, violations, exceptionsApplied,
		rejectedOverload, admissionInflight, unknownFields.vec)
}

// exceptionLabel says whether podsieve_exceptions_applied_total has a series
// per exception (--metrics-exception-label). Off by default: a namespace
// editor can create exceptions, and with them series, without bound. With it
// off the label is empty, which Prometheus treats as absent, so the metric
// keeps its name and label names and only its cardinality changes.
var exceptionLabel atomic.Bool

func countExceptionApplied(namespace, name string) {
	if !exceptionLabel.Load() {
		name = ""
	}
	exceptionsApplied.WithLabelValues(namespace, name).Inc()
}

// maxUnknownFieldSeries bounds podsieve_unknown_fields_total: beyond it, new
// fields are counted under field="(other)".
const maxUnknownFieldSeries = 100

// unknownFieldOther is the field label of unknown fields past the cap.
const unknownFieldOther = "(other)"

// unknownFieldCounter counts the unknown fields a strict decode reports and
// logs each distinct kind and path once.
type unknownFieldCounter struct {
	vec *prometheus.CounterVec
	max int

	mu   sync.Mutex
	seen map[[2]string]bool
	full bool
}

var (
	unknownFieldRE = regexp.MustCompile(`^unknown field "(.+)"$`)
	listIndexRE    = regexp.MustCompile(`\[\d+\]`)
)

// record counts the unknown fields of a runtime.StrictDecodingError and
// returns their paths. Duplicate fields (which the strict decode also
// reports) are not unknown and not counted.
func (u *unknownFieldCounter) record(ctx context.Context, obj runtime.Object, err error) []string {
	strict, ok := err.(interface{ Errors() []error })
	if !ok {
		return nil
	}
	var paths []string
	kind := kindOf(obj)
	for _, e := range strict.Errors() {
		m := unknownFieldRE.FindStringSubmatch(e.Error())
		if m == nil {
			continue
		}
		paths = append(paths, m[1])
		field := listIndexRE.ReplaceAllString(m[1], "[*]")
		u.vec.WithLabelValues(kind, u.admit(ctx, kind, field)).Inc()
	}
	return paths
}

// admit returns the field label for kind and field: field itself while
// fewer than max distinct series exist, unknownFieldOther after. It logs
// every new path once.
func (u *unknownFieldCounter) admit(ctx context.Context, kind, field string) string {
	key := [2]string{kind, field}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen[key] {
		return field
	}
	if len(u.seen) >= u.max {
		if !u.full {
			u.full = true
			logf.FromContext(ctx).Info("more unknown fields than podsieve_unknown_fields_total keeps series for; counting the rest as field=\"(other)\"",
				"max", u.max)
		}
		return unknownFieldOther
	}
	u.seen[key] = true
	logf.FromContext(ctx).Info("object carries a field this build of podsieve does not know; it was dropped before the checks (logged once per kind and field)",
		"kind", kind, "field", field)
	return field
}

func kindOf(obj runtime.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	if gvks, _, err := scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
		return gvks[0].Kind
	}
	return "unknown"
}
