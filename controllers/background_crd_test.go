package controllers

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"

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
