package controllers

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/buildinfo"
	"github.com/podsieve/podsieve/internal/index"
)

// metricsIndex is the index the gauges read: the one Setup built.
var metricsIndex atomic.Pointer[index.Index]

// metricsLeader tells the leader-only series whether this replica leads;
// nil (before Setup) counts as leading.
var metricsLeader atomic.Pointer[leadership]

// leaderOnly exposes a collector's series only while this replica leads:
// series every replica would export the same (one per PolicyException,
// up to 100,000) are exported once, by the leader. Every replica keeps
// them, so that a new leader exports them at once.
type leaderOnly struct{ prometheus.Collector }

func (l leaderOnly) Collect(ch chan<- prometheus.Metric) {
	if leader := metricsLeader.Load(); leader == nil || leader.isLeader() {
		l.Collector.Collect(ch)
	}
}

// buildInfo is 1, labelled with the binary's version, for dashboards and
// alerts that join on it (what version each replica runs).
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "podsieve_build_info",
	Help: "1, labelled with the version, the source revision and the Go version podsieve was built with.",
}, []string{"version", "revision", "goversion"})

// exceptionExpiry has a series per PolicyException in force with an
// expiresAt, so that an alert can warn before workloads that rely on one
// are refused. Its cardinality is bounded by what the index holds: the
// exceptions within --max-exceptions-per-namespace of each namespace.
var exceptionExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "podsieve_policyexception_expiry_timestamp_seconds",
	Help: "spec.expiresAt of each PolicyException in force (Ready), in seconds since the epoch; no series for exceptions without expiresAt or not in force. Exported by the leader only.",
}, []string{"namespace", "name"})

// setExceptionExpiry keeps an exception's expiry series: set while it is in
// force with an expiry, deleted otherwise (no expiry, not Ready, beyond the
// limit, gone).
func setExceptionExpiry(namespace, name string, inForce bool, expiresAt *time.Time) {
	if !inForce || expiresAt == nil {
		exceptionExpiry.DeleteLabelValues(namespace, name)
		return
	}
	exceptionExpiry.WithLabelValues(namespace, name).Set(float64(expiresAt.UnixNano()) / 1e9)
}

// policyStates are the values of podsieve_securitypolicy_state's state
// label: the reasons of the SecurityPolicy Ready condition.
var policyStates = []string{policyv1alpha1.ReasonCompiled, policyv1alpha1.ReasonDegraded, policyv1alpha1.ReasonInvalidSpec}

// policyStateGauge has one series per SecurityPolicy, for the state it is in on
// this replica, so that an alert names the policy that is not enforced as
// written (or at all) on any replica. Its cardinality is the number of
// SecurityPolicies, which only cluster admins create.
var policyStateGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "podsieve_securitypolicy_state",
	Help: "1 for the state of each SecurityPolicy as this replica enforces it, the reason of its Ready condition: Compiled (as written), Degraded (an earlier generation, or the spec read at its strictest, because it does not compile), InvalidSpec (not enforced).",
}, []string{"name", "state"})

// setPolicyState keeps a policy's series: state set to 1, the other states'
// series deleted; "" deletes them all (the policy is gone).
func setPolicyState(name, state string) {
	for _, s := range policyStates {
		if s == state {
			policyStateGauge.WithLabelValues(name, s).Set(1)
		} else {
			policyStateGauge.DeleteLabelValues(name, s)
		}
	}
}

// enforcedByAPIServer has one series per SecurityPolicy while
// --admission-policies is on, on the leader: whether the API server
// enforces it itself (its EnforcedByAPIServer condition). With the pod
// webhook on failurePolicy Ignore, a policy at 0 is one a podsieve outage
// lets violations past.
var enforcedByAPIServer = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "podsieve_securitypolicy_enforced_by_apiserver",
	Help: "1 when the API server enforces the SecurityPolicy itself through the ValidatingAdmissionPolicy podsieve compiled from it (its EnforcedByAPIServer condition is True), 0 when it does not; exported by the leader while --admission-policies is on.",
}, []string{"name"})

// setEnforcedByAPIServer keeps a policy's series; deleted reports none
// (the policy is gone, or the feature off).
func setEnforcedByAPIServer(name string, enforced, deleted bool) {
	switch {
	case deleted:
		enforcedByAPIServer.DeleteLabelValues(name)
	case enforced:
		enforcedByAPIServer.WithLabelValues(name).Set(1)
	default:
		enforcedByAPIServer.WithLabelValues(name).Set(0)
	}
}

func init() {
	metrics.Registry.MustRegister(enforcedByAPIServer)
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
	buildInfo.WithLabelValues(buildinfo.Release(), buildinfo.Revision(), runtime.Version()).Set(1)
	metrics.Registry.MustRegister(
		buildInfo,
		leaderOnly{exceptionExpiry},
		policyStateGauge,
		// What /readyz's "index" check reads: an alert on it tells a
		// replica that is up but cannot decide from one whose probe fails
		// for another reason (certificate, draining).
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsieve_index_ready",
			Help: "1 when every object the caches held at start has been reconciled into the index (the readiness check \"index\"), 0 before.",
		}, func() float64 {
			if ix := metricsIndex.Load(); ix != nil && ix.Ready() {
				return 1
			}
			return 0
		}),
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
