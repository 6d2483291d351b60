package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSampleGuardrailsRefuseAttacks: podsieve eval with the shipped samples
// and a namespace editor's PolicyException refuses the pod the exception
// was written for, and names the exception as not applied with the
// guardrail's message: an app container given NET_ADMIN and NET_RAW by an
// image glob on the attacker's registry, an image glob that matches every
// image, and an init-only capability waiver stretched over a native sidecar
// named istio-init.
func TestSampleGuardrailsRefuseAttacks(t *testing.T) {
	const exception = `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: attempt, namespace: staging}
spec:
  exceptions: [{policyName: pod-security-standards, ruleNames: ["*"]}]
  justification: "ticket SEC-1"
  expiresAt: "2026-12-01T00:00:00Z"
  podSecurity:
`
	const appPod = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: staging}
spec:
  containers:
  - name: app
    image: registry.attacker.example/team/app:1
    securityContext: {capabilities: {add: [NET_ADMIN, NET_RAW]}}
`
	const sidecarPod = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: staging}
spec:
  initContainers:
  - name: istio-init
    image: docker.io/istio/proxyv2:1.24.0
    restartPolicy: Always
    securityContext: {capabilities: {add: [NET_ADMIN, NET_RAW]}}
  containers:
  - {name: app, image: registry.example/team/web:1}
`
	tests := []struct {
		name    string
		entry   string
		pod     string
		message string
	}{
		{"the attacker's registry", `  - {controlName: Capabilities, containerNames: [app], containerKinds: [App], images: ["registry.attacker.example/team/app"], restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]}`,
			appPod, `"registry.attacker.example/team/app" can match images outside the registries and path prefixes the policy allows`},
		{"a universal image glob", `  - {controlName: Capabilities, containerNames: [app], containerKinds: [App], images: ["**:*"], restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]}`,
			appPod, `"**:*" matches any image`},
		{"a native sidecar named istio-init", `  - {controlName: Capabilities, containerNames: [istio-init], images: ["docker.io/istio/proxyv2"], restrictedField: "spec.initContainers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]}`,
			sidecarPod, `allows exceptions for control "Capabilities" only for containers of kinds "Init"`},
		{"a native sidecar named istio-init, as a sidecar", `  - {controlName: Capabilities, containerNames: [istio-init], containerKinds: [Sidecar], images: ["docker.io/istio/proxyv2"], restrictedField: "spec.initContainers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]}`,
			sidecarPod, `Sidecar is not among the kinds of container policy "pod-security-standards" allows`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "attempt.yaml")
			if err := os.WriteFile(file, []byte(exception+tt.entry+"\n---\n"+tt.pod), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"eval", "--now", "2026-11-23T00:00:00Z", "-f", samples, "-f", file}, nil, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != exitDenied {
				t.Fatalf("exit %d, want %d (refused):\n%s", code, exitDenied, out)
			}
			if !strings.Contains(out, "not applied: exception/staging/attempt") || !strings.Contains(out, tt.message) {
				t.Errorf("the refusal does not say that exception/staging/attempt does not apply with %q:\n%s", tt.message, out)
			}
		})
	}
}
