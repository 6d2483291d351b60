package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/testenv"
)

// hostPIDPod is refused by any baseline policy.
func hostPIDPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "host-pid-"},
		Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
}

// TestManager runs `podsieve manager` against a real API server, as a user
// would with a kubeconfig: /readyz turns ready, a policy gets its Ready
// condition, the API server calls its webhook over TLS and a violating pod
// is refused, and cancelling the context stops the manager cleanly.
func TestManager(t *testing.T) {
	c := newTestCluster(t, testenv.StartWithWebhooks)
	stop := c.startManager(t, "--exceptions-namespace", "podsieve-system", "--cert-rotation=false",
		"--webhook-cert-dir", c.env.WebhookInstallOptions.LocalServingCertDir)
	defer stop()
	ctx := context.Background()

	c.createReadyPolicy(t, "smoke", enginetest.BaselineRule)
	err := c.k8s.Create(ctx, hostPIDPod())
	if err == nil || !strings.Contains(err.Error(), `admission webhook "pods.podsieve.dev" denied the request: Pod default/host-pid-`) ||
		!strings.Contains(err.Error(), `is refused by SecurityPolicy "smoke" rule "r" (baseline:latest):`) {
		t.Fatalf("a hostPID pod was not refused by the manager's webhook: %v", err)
	}
}

// TestManagerRestartNeverAdmitsRefused: while a stream of pods that an
// Enforce policy refuses is being created, the manager is stopped and
// started again. Whether the webhook is down (the API server's failurePolicy
// Fail), starting (the index not built yet) or serving, no such pod is ever
// admitted.
func TestManagerRestartNeverAdmitsRefused(t *testing.T) {
	c := newTestCluster(t, testenv.StartWithWebhooks)
	args := []string{"--cert-rotation=false", "--webhook-cert-dir", c.env.WebhookInstallOptions.LocalServingCertDir}
	stop := c.startManager(t, args...)
	ctx := context.Background()
	if err := c.k8s.Create(ctx, mustSecurityPolicy(t, "no-host-pid", enginetest.BaselineRule)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the policy to refuse", func() bool { return c.k8s.Create(ctx, hostPIDPod()) != nil })

	var admitted, refused atomic.Int64
	streamDone := make(chan struct{})
	streamCtx, endStream := context.WithCancel(ctx)
	go func() {
		defer close(streamDone)
		for streamCtx.Err() == nil {
			if c.k8s.Create(ctx, hostPIDPod()) == nil {
				admitted.Add(1)
			} else {
				refused.Add(1)
			}
		}
	}()
	// Each phase lasts until the stream has sent requests in it, not for a
	// length of time: serving, down (the API server cannot reach the
	// webhook), and serving again after the start.
	requestsIn := func(phase string) {
		from := admitted.Load() + refused.Load()
		waitFor(t, "requests "+phase, func() bool { return admitted.Load()+refused.Load() >= from+5 })
	}
	for range 2 {
		requestsIn("while serving")
		stop()
		requestsIn("while the webhook is down")
		stop = c.startManager(t, args...)
	}
	requestsIn("after the last start")
	endStream()
	<-streamDone
	stop()
	if admitted.Load() != 0 {
		t.Fatalf("%d hostPID pods were admitted across manager restarts (%d refused)", admitted.Load(), refused.Load())
	}
	if refused.Load() < 10 {
		t.Fatalf("only %d requests were sent; the stream did not run", refused.Load())
	}
	t.Logf("%d requests refused across two restarts, none admitted", refused.Load())
}

// TestManagerWithoutPolicyReportCRD: a cluster without the PolicyReport CRD
// (config/policyreport not installed) still gets a working manager: it turns
// ready, compiles policies and stops cleanly; only the background scan is
// off (TestScannerWaitsForPolicyReportCRD checks what it says).
func TestManagerWithoutPolicyReportCRD(t *testing.T) {
	c := newTestCluster(t, testenv.StartWithoutPolicyReports)
	stop := c.startManager(t, "--enable-webhooks=false")
	defer stop()
	c.createReadyPolicy(t, "no-reports", enginetest.BaselineRule)
}

// TestManagerRefusesBadScanFlags: a flag value the scan cannot use stops
// the manager before it starts, with the flag and what to use instead.
func TestManagerRefusesBadScanFlags(t *testing.T) {
	cases := []struct {
		name, flag, want string
	}{
		{"no writes", "--background-writes-per-second=0", "--background-writes-per-second 0: use a rate above 0 and at most 1000"},
		{"too many writes", "--background-writes-per-second=5000", "--background-writes-per-second 5000: use a rate above 0 and at most 1000"},
		{"not a number of writes", "--background-writes-per-second=NaN", "--background-writes-per-second NaN: use a rate above 0 and at most 1000"},
		{"unknown report API", "--report-api=policyreports", `--report-api "policyreports": use auto, openreports or wgpolicyk8s`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run([]string{"manager", tc.flag}, nil, io.Discard, &stderr); code == 0 {
				t.Fatalf("manager %s exited 0", tc.flag)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.want)
			}
		})
	}
}
