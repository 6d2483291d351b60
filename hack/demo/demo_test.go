//go:build e2e

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/podsieve/podsieve/internal/testenv"
)

// TestDemo runs `make demo`'s walkthrough with DEMO_EXIT=1 on the cluster
// test/e2e uses and checks that each scenario shows the outcome it
// announces. Run with `make test-e2e`, which builds the cluster.
func TestDemo(t *testing.T) {
	assets := os.Getenv("E2E_CLUSTER_ASSETS")
	if assets == "" {
		t.Fatal("E2E_CLUSTER_ASSETS is not set: run `make test-e2e`, or set it to what hack/setup-cluster.sh prints")
	}
	bin := filepath.Join(t.TempDir(), "podsieve")
	build := exec.Command("go", "build", "-o", bin, "./cmd/podsieve")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build podsieve: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, assets, bin, &out, true); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		// The sample mesh-init exception expires in 2027; the pods are
		// admitted by the policy's own exclusion either way.
		"deployment.apps/web created",
		`deployment "web" successfully rolled out`,
		// The API server's own form of the policies refuses first.
		`ValidatingAdmissionPolicy 'podsieve.pod-security-standards' with binding 'podsieve.pod-security-standards' denied request: Deployment staging/net-tool is refused by SecurityPolicy "pod-security-standards" rule "baseline-service-mesh" (baseline:latest):`,
		"Warning: DaemonSet staging/node-exporter is admitted under PolicyException staging/exporter-port\ndaemonset.apps/node-exporter created",
		`daemon set "node-exporter" successfully rolled out`,
		`DaemonSet prod/node-exporter is refused by SecurityPolicy`,
		"Warning: PolicyException prod/old-debug will not apply: spec.expiresAt",
		`DaemonSet prod/node-exporter-2 is refused by SecurityPolicy`,
		"exception/prod/old-debug does not apply: expired at",
		// The policy tightened under the running Deployment.
		"deployment.apps/web scaled",
		": Error creating: ",
		`is refused by SecurityPolicy "restricted-workloads" rule "restricted"`,
		// Enforcement by the API server itself, with no replica running.
		"pod-security-standards   Enforce   True",
		"(podsieve's manager processes are stopped: 0 replicas run)",
		`Error from server (Forbidden): error when creating "STDIN": deployments.apps "net-tool" is forbidden: ValidatingAdmissionPolicy 'podsieve.pod-security-standards'`,
		"pod/nginx created",
		"(podsieve's manager runs again: 1 replica ready)",
		// The background scan: staging's running objects, judged.
		"policy.podsieve.dev/restricted-workloads",
		"Deployment/web: fail (Enforce):",
		"DaemonSet/node-exporter: fail (Enforce):",
		"1 rule compiled; enforced with action Enforce",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo does not show %q", want)
		}
	}
	// kubectl get polr: the scope of each report, by default.
	if !regexp.MustCompile(`NAME\s+KIND\s+OBJECT\s+PASS`).MatchString(out.String()) {
		t.Error("the demo's kubectl get polr does not show each report's KIND and OBJECT")
	}
	// The scale-up's refusal: the webhook's message or the API server's,
	// whichever refuses first (the API server's form of the tightened
	// policy may not be in place yet).
	if !regexp.MustCompile(`Error creating: (pods "web-[^"]+" is forbidden: ValidatingAdmissionPolicy '[^']+' with binding '[^']+' denied request|admission webhook "pods.podsieve.dev" denied the request): Pod staging/web-`).MatchString(out.String()) {
		t.Error("the demo does not show the refusal of web's scale-up")
	}
	// web's pods repeat their Deployment: the reports name the Deployment
	// once, not each pod.
	if strings.Contains(out.String(), "Pod/web-") {
		t.Error("the demo reports web's pods apart from their Deployment")
	}
	// Both web pods kept running after the scale-up was refused.
	if !strings.Contains(out.String(), "2/3") {
		t.Error("the demo does not show web at 2/3 ready after the refused scale-up")
	}
	if strings.Contains(out.String(), "will not apply: spec.exceptions[0].policyName") {
		t.Error("the sample exceptions were applied before their policies")
	}
	// Every exception the demo applies is within the sample policies'
	// guardrails: only old-debug fails to apply, for its expiry.
	for _, notWant := range []string{"honours no PolicyExceptions", "NotPermitted", "will not apply: spec.podSecurity", "cannot create", "cannot patch"} {
		if strings.Contains(out.String(), notWant) {
			t.Errorf("the demo shows %q: an exception it applies is outside the policy's guardrails, or the developer may not do what the demo shows", notWant)
		}
	}
	if t.Failed() {
		t.Log(out.String())
	}
}
