package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podsieve/podsieve/internal/index"
)

// expirySeries is the value of the series
// podsieve_policyexception_expiry_timestamp_seconds of an exception in
// namespace "metrics", and whether it has one (read without creating it).
func expirySeries(t *testing.T, name string) (float64, bool) {
	const namespace = "metrics"
	t.Helper()
	ch := make(chan prometheus.Metric, 1000)
	exceptionExpiry.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["namespace"] == namespace && labels["name"] == name {
			return d.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestExceptionExpiryMetric: an exception in force with expiresAt has a
// series holding it; none without expiresAt; the series goes when the
// exception expires (no longer in force) and when it is deleted, which the
// reconciler sees as NotFound.
func TestExceptionExpiryMetric(t *testing.T) {
	ctx := context.Background()
	soon := exceptionNaming("metrics", "soon", "open", `expiresAt: "2026-11-23T13:00:00Z"`)
	later := exceptionNaming("metrics", "later", "open", `expiresAt: "2026-12-01T00:00:00Z"`)
	forever := exceptionNaming("metrics", "forever", "open", "")
	f := newExceptionFixture(t, soon, later, forever)
	reconcileAll := func() {
		t.Helper()
		for _, pe := range []client.Object{soon, later, forever} {
			if _, err := f.r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pe)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	reconcileAll()
	for name, want := range map[string]time.Time{
		"soon":  time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC),
		"later": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, ok := expirySeries(t, name); !ok || got != float64(want.Unix()) {
			t.Errorf("%s: series %v (present %v), want %v", name, got, ok, want.Unix())
		}
	}
	if _, ok := expirySeries(t, "forever"); ok {
		t.Error("an exception without expiresAt has an expiry series")
	}

	f.clk.Step(2 * time.Hour) // soon has expired
	reconcileAll()
	if _, ok := expirySeries(t, "soon"); ok {
		t.Error("an expired exception keeps its expiry series")
	}

	noErr(t, f.c.Delete(ctx, later))
	reconcileAll()
	if _, ok := expirySeries(t, "later"); ok {
		t.Error("a deleted exception keeps its expiry series")
	}
}

// TestIndexReadyMetric: podsieve_index_ready follows the index's Ready,
// which the readiness check "index" reads.
func TestIndexReadyMetric(t *testing.T) {
	saved := metricsIndex.Load()
	t.Cleanup(func() { metricsIndex.Store(saved) })
	value := func() float64 {
		t.Helper()
		families, err := metrics.Registry.Gather()
		noErr(t, err)
		for _, f := range families {
			if f.GetName() == "podsieve_index_ready" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("podsieve_index_ready is not registered")
		return 0
	}
	ix := index.New("podsieve-system")
	metricsIndex.Store(ix)
	if got := value(); got != 0 {
		t.Errorf("before the index is built: %v, want 0", got)
	}
	ix.MarkReady()
	if got := value(); got != 1 {
		t.Errorf("once the index is built: %v, want 1", got)
	}
}

// TestLeaderOnlySeries: the per-exception expiry series are exported by
// the leader only; every replica keeps them, so a new leader exports them
// at once.
func TestLeaderOnlySeries(t *testing.T) {
	defer metricsLeader.Store(metricsLeader.Load())
	exceptionExpiry.WithLabelValues("leader-only", "e").Set(1)
	defer exceptionExpiry.DeleteLabelValues("leader-only", "e")
	elected := make(chan struct{})
	count := func() int {
		ch := make(chan prometheus.Metric, 1000)
		leaderOnly{exceptionExpiry}.Collect(ch)
		close(ch)
		n := 0
		for range ch {
			n++
		}
		return n
	}
	for _, step := range []struct {
		name   string
		change func()
		want   bool
	}{
		{"a follower", func() { metricsLeader.Store(&leadership{elected: elected}) }, false},
		{"elected", func() { close(elected) }, true},
	} {
		step.change()
		if got := count() > 0; got != step.want {
			t.Errorf("%s: exports %d series, want some: %v", step.name, count(), step.want)
		}
	}
}

// TestBuildInfo: podsieve_build_info is 1 with the binary's version.
func TestBuildInfo(t *testing.T) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "podsieve_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("podsieve_build_info = %v, want one series of 1", f.GetMetric())
		}
		return
	}
	t.Fatal("podsieve_build_info is not registered")
}
