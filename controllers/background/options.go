package background

import (
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/podsieve/podsieve/internal/engine"
)

// Options configure the background scan.
type Options struct {
	// Disabled turns the scan off.
	Disabled bool
	// ResyncPeriod is how often every namespace is scanned again, to catch
	// anything an event missed; 1h when zero.
	ResyncPeriod time.Duration
	// Batch is how long a namespace waits after a change before it is
	// scanned, so that a burst of changes (a rollout) costs one scan; 1s
	// when zero.
	Batch time.Duration
	// StatusInterval is how often the counters in SecurityPolicy and
	// PolicyException status are written; 10s when zero.
	StatusInterval time.Duration
	// WritesPerSecond bounds report writes to the API server; 20 when zero.
	WritesPerSecond float64
	// ReportControlledPods reports every result of a pod that a judged
	// controller controls. By default a pod's result is reported only when
	// it differs from its controller's (report.Differing).
	ReportControlledPods bool
	// ReportAPI is where results are written; ReportAPIAuto when empty.
	ReportAPI ReportAPI
	// Events, when set, receives a Warning event (reason PolicyViolation)
	// on each violating object that no controller owns (events.go).
	Events events.EventRecorder
	// EventsPerSecond bounds those events, with a burst of five times as
	// many; 5 when zero.
	EventsPerSecond float64

	// ExceptionsNamespace is the cluster exceptions namespace, whose
	// exceptions may reach any namespace. Set by controllers.Setup.
	ExceptionsNamespace string
	// Clock tells the time of each decision; the real clock when nil. Set
	// by controllers.Setup.
	Clock clock.PassiveClock
	// CrossCheck decides each object the scan decides a second time, with
	// the engine and with the API server's form of the policies, and counts
	// where they differ (crosscheck.go). Set by controllers.Setup when
	// --admission-policies is on.
	CrossCheck bool
	// CrossCheckBudget bounds the cross-check's time per scan of a
	// namespace (500ms when zero): a tenant's exceptions are compiled again
	// by every CEL evaluation, so a namespace editor can make each one cost
	// tens of milliseconds. What the budget leaves out is not_compared.
	CrossCheckBudget time.Duration
	// ExceptionsApplied, when set, is told which exceptions waived a
	// violation of a scanned object, as the webhook tells it of admitted
	// ones (controllers.ExceptionUsage.Applied, for lastAppliedTime). Set
	// by controllers.Setup.
	ExceptionsApplied func(sources []engine.Source, at time.Time)
}

// Default fills in the zero values.
func (o *Options) Default() {
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = time.Hour
	}
	if o.Batch == 0 {
		o.Batch = time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = 10 * time.Second
	}
	if o.WritesPerSecond == 0 {
		o.WritesPerSecond = 20
	}
	if o.ReportAPI == "" {
		o.ReportAPI = ReportAPIAuto
	}
	if o.EventsPerSecond == 0 {
		o.EventsPerSecond = 5
	}
	if o.CrossCheckBudget == 0 {
		o.CrossCheckBudget = 500 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}
