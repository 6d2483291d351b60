package controllers

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestScannerWaitsForPolicyReportCRD: against an API server without the
// PolicyReport CRD, the scan stays off and says once, in the log, what to
// install; once the CRD is installed it turns on.
func TestScannerWaitsForPolicyReportCRD(t *testing.T) {
	env, cfg, err := testenv.StartWithoutPolicyReports()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	s := &Scanner{discovery: dc}

	ctx, cancel := context.WithTimeout(log.IntoContext(context.Background(), logger), 2*time.Second)
	defer cancel()
	if s.waitForReportCRD(ctx) {
		t.Fatal("the scan turned on without the PolicyReport CRD")
	}
	mu.Lock()
	got := strings.Join(lines, "\n")
	mu.Unlock()
	if len(lines) != 1 || !strings.Contains(got, "background scan is off: the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed") ||
		!strings.Contains(got, "kubectl apply -k config/policyreport") {
		t.Errorf("want one log line naming the CRD and how to install it, got:\n%s", got)
	}

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{testenv.PolicyReportCRDs()}}); err != nil {
		t.Fatal(err)
	}
	if !s.waitForReportCRD(log.IntoContext(context.Background(), logr.Discard())) {
		t.Fatal("the scan did not turn on once the CRD was installed")
	}
}

// TestSetLastApplied: lastAppliedTime moves forward by at least the
// granularity, never back.
func TestSetLastApplied(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		current *time.Time
		at      time.Time
		want    time.Time
	}{
		{name: "first application is written", at: base, want: base},
		{name: "a later one moves it", current: &base, at: base.Add(lastAppliedGranularity), want: base.Add(lastAppliedGranularity)},
		{name: "one within the granularity does not", current: &base, at: base.Add(lastAppliedGranularity - time.Second), want: base},
		{name: "an older one never moves it back", current: &base, at: base.Add(-time.Hour), want: base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st policyv1alpha1.PolicyExceptionStatus
			if tc.current != nil {
				st.LastAppliedTime = &metav1.Time{Time: *tc.current}
			}
			setLastApplied(&st, tc.at)
			if st.LastAppliedTime == nil || !st.LastAppliedTime.Time.Equal(tc.want) {
				t.Errorf("lastAppliedTime = %v, want %v", st.LastAppliedTime, tc.want)
			}
		})
	}
}
