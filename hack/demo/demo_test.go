package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsieve/podsieve/internal/testenv"
)

// TestDemo runs `make demo`'s walkthrough with DEMO_EXIT=1 and checks that
// each scenario shows the outcome it announces.
func TestDemo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "podsieve")
	build := exec.Command("go", "build", "-o", bin, "./cmd/podsieve")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build podsieve: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, bin, &out, true); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		// The sample mesh-init exception expires in 2027; the pod is admitted by
		// the policy's own exclusion either way.
		"pod/web-istio created",
		`admission webhook "pods.podsieve.dev" denied the request: Pod staging/net-tool is refused by SecurityPolicy "pod-security-standards" rule "baseline-service-mesh" (baseline:latest):`,
		"Warning: Pod staging/node-exporter is admitted under PolicyException staging/exporter-port\npod/node-exporter created",
		`denied the request: Pod prod/node-exporter is refused`,
		"Warning: PolicyException prod/old-debug will not apply: spec.expiresAt",
		`denied the request: Pod prod/node-exporter-2 is refused`,
		"exception/prod/old-debug does not apply: expired at",
		"1 rule compiled; enforced with action Enforce",
		// The background scan: staging's running pods, judged.
		"podsieve-restricted-workloads",
		"Pod/node-exporter: fail (Enforce):",
		"Pod/web-istio: fail (Enforce):",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo does not show %q", want)
		}
	}
	if strings.Contains(out.String(), "will not apply: spec.exceptions[0].policyName") {
		t.Error("the sample exceptions were applied before their policies")
	}
	// Every exception the demo applies is within the sample policies'
	// guardrails: only old-debug fails to apply, for its expiry.
	for _, notWant := range []string{"honours no PolicyExceptions", "NotPermitted", "will not apply: spec.podSecurity"} {
		if strings.Contains(out.String(), notWant) {
			t.Errorf("the demo shows %q: an exception it applies is outside the policy's guardrails", notWant)
		}
	}
	if t.Failed() {
		t.Log(out.String())
	}
}
